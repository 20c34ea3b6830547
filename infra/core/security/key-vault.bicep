// The Key Vault that holds Cairn's secrets (API keys, encryption keys, the audit signing key). The
// template creates the vault only, never a secret: a secret created here would carry its value in
// the template or the deployment history. The operator sets each one with `az keyvault secret set`
// (see infra/README.md) and the app reads them through Key Vault references.

@description('Required. Globally unique name of the vault (3-24 letters, digits and hyphens, starting with a letter).')
@minLength(3)
@maxLength(24)
param name string

@description('Required. Azure region of the vault.')
param location string

@description('Optional. Tags applied to the vault.')
param tags object = {}

@description('Optional. Days a deleted vault or secret stays recoverable before it is purged.')
@minValue(7)
@maxValue(90)
param softDeleteRetentionInDays int = 90

@description('Optional. Purge protection: a deleted secret cannot be purged before its retention ends. It cannot be turned off again once on.')
param enablePurgeProtection bool = true

resource keyVault 'Microsoft.KeyVault/vaults@2024-11-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    // Access through Azure RBAC roles (Key Vault Secrets User for the app), never access policies:
    // one permission model for storage, telemetry and secrets, reviewed in one place (app/rbac.bicep).
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    // Losing an encryption key makes the data it sealed unreadable: a deleted key must stay
    // recoverable for the whole retention period.
    enablePurgeProtection: enablePurgeProtection ? true : null
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

@description('Name of the vault.')
output name string = keyVault.name

@description('Resource id of the vault.')
output id string = keyVault.id

@description('Data-plane URI of the vault, with a trailing slash.')
output uri string = keyVault.properties.vaultUri
