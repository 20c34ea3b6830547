// The Cairn Function App on Flex Consumption, Node 22. Every connection is identity-based: the host
// reaches its own storage account through the AzureWebJobsStorage__* service URIs with the
// user-assigned identity; Cairn reaches the data account with the same identity (AZURE_CLIENT_ID,
// no CAIRN_STORAGE_ACCOUNT_KEY); telemetry is sent with an Entra ID token; the secrets Cairn needs
// (API keys, encryption keys, the audit signing key) are Key Vault references resolved by the
// platform with that identity. No setting holds a secret.

@description('Required. Name of the Function App (globally unique: it is the host name).')
param name string

@description('Required. Azure region of the Function App.')
param location string

@description('Optional. Tags applied to the Function App; the azd-service-name tag is added.')
param tags object = {}

@description('Optional. Name of the service in azure.yaml; azd finds the app by this tag.')
param serviceName string = 'api'

@description('Required. Resource id of the Flex Consumption plan.')
param appServicePlanId string

@description('Required. Name of the storage account of the Functions host: host locks, the Durable task hub and the deployment package.')
param hostStorageAccountName string

@description('Required. Name of the blob container of the host storage account that receives the deployment package.')
param deploymentStorageContainerName string

@description('Required. Name of the storage account of Cairn\'s data (CAIRN_BLOB_ENDPOINT, CAIRN_QUEUE_ENDPOINT, CAIRN_TABLE_ENDPOINT).')
param dataStorageAccountName string

@description('Required. Name of the Key Vault that holds Cairn\'s secrets.')
param keyVaultName string

@description('Required. Resource id of the user-assigned managed identity the app runs as.')
param identityId string

@description('Required. Client id of the user-assigned managed identity.')
param identityClientId string

@description('Required. Name of the Application Insights component.')
param applicationInsightsName string

@description('Required. CAIRN_BLOB_CONTAINER: base name of the per-tenant blob containers (3-39 lowercase letters, digits, single hyphens).')
@minLength(3)
@maxLength(39)
param blobContainerBase string

@description('Required. CAIRN_AUTH_ISSUER: the issuer (iss) that accepted tokens carry.')
@minLength(1)
param authIssuer string

@description('Required. CAIRN_AUTH_AUDIENCE: the audience (aud) that accepted tokens carry: the client id of the app registration (v2.0 tokens) or its Application ID URI (v1.0 tokens).')
@minLength(1)
param authAudience string

@description('Required. CAIRN_AUTH_JWKS_URI: URL of the signing keys of the issuer.')
@minLength(1)
param authJwksUri string

@description('Required. CAIRN_AUTH_TENANT_CLAIM: the token claim that names the Cairn tenant.')
@minLength(1)
param authTenantClaim string

@description('Required. CAIRN_MAX_VALUE_BYTES: largest key/value value in bytes.')
@minValue(1)
@maxValue(67108864)
param maxValueBytes int

@description('Required. CAIRN_LOG_LEVEL: pino level.')
@allowed([
  'fatal'
  'error'
  'warn'
  'info'
  'debug'
  'trace'
  'silent'
])
param logLevel string

@description('Optional. Memory of each instance in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Optional. Upper bound on the number of instances the app scales out to.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

resource hostStorageAccount 'Microsoft.Storage/storageAccounts@2024-01-01' existing = {
  name: hostStorageAccountName
}

resource dataStorageAccount 'Microsoft.Storage/storageAccounts@2024-01-01' existing = {
  name: dataStorageAccountName
}

resource keyVault 'Microsoft.KeyVault/vaults@2024-11-01' existing = {
  name: keyVaultName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': serviceName })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: appServicePlanId
    httpsOnly: true
    // Key Vault references are resolved with the identity the app runs as (the default would be a
    // system-assigned identity, which this app does not have).
    keyVaultReferenceIdentity: identityId
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${hostStorageAccount.properties.primaryEndpoints.blob}${deploymentStorageContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      // Node 20 left Azure Functions support on 2026-04-30. The code also runs on Node 20 locally
      // (package.json engines); nothing in it needs 22.
      runtime: {
        name: 'node'
        version: '22'
      }
    }
  }
}

// The complete set of app settings (this resource replaces them all on every deployment). Flex
// Consumption derives FUNCTIONS_WORKER_RUNTIME and FUNCTIONS_EXTENSION_VERSION from
// functionAppConfig and refuses them as settings. test/infra/bicep.test.ts checks this list against
// the SETTINGS of shared/config.ts.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'appsettings'
  properties: {
    // Host storage (timers, locks, the Durable task hub): identity-based, one URI per service.
    AzureWebJobsStorage__blobServiceUri: hostStorageAccount.properties.primaryEndpoints.blob
    AzureWebJobsStorage__queueServiceUri: hostStorageAccount.properties.primaryEndpoints.queue
    AzureWebJobsStorage__tableServiceUri: hostStorageAccount.properties.primaryEndpoints.table
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    // Telemetry, sent with an Entra ID token of the same identity (local auth is disabled).
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    // Cairn's data: its own account, reached with the managed identity (no account key).
    AZURE_CLIENT_ID: identityClientId
    CAIRN_BLOB_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.blob
    CAIRN_BLOB_CONTAINER: blobContainerBase
    // The email-window queue of the emailWindowPoll timer.
    CAIRN_QUEUE_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.queue
    // The session index of the archives (Azure Table Storage).
    CAIRN_TABLE_ENDPOINT: dataStorageAccount.properties.primaryEndpoints.table
    // Entra ID bearer tokens.
    CAIRN_AUTH_ISSUER: authIssuer
    CAIRN_AUTH_AUDIENCE: authAudience
    CAIRN_AUTH_JWKS_URI: authJwksUri
    CAIRN_AUTH_TENANT_CLAIM: authTenantClaim
    CAIRN_MAX_VALUE_BYTES: string(maxValueBytes)
    CAIRN_LOG_LEVEL: logLevel
    // Secrets: Key Vault references, resolved by the platform with keyVaultReferenceIdentity. No
    // version in the URI: the app gets the newest version of each secret (see infra/README.md for
    // rotation). A secret that is missing leaves the reference text itself in the setting; that
    // text is no valid value of any of the three, so the app stops at start-up naming the setting
    // instead of running without the secret.
    CAIRN_API_KEYS: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-api-keys/)'
    CAIRN_ENCRYPTION_KEYS: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-encryption-keys/)'
    CAIRN_AUDIT_SIGNING_KEY: '@Microsoft.KeyVault(SecretUri=${keyVault.properties.vaultUri}secrets/cairn-audit-signing-key/)'
  }
}

@description('Name of the Function App.')
output name string = functionApp.name

@description('Base URL of the Function App.')
output uri string = 'https://${functionApp.properties.defaultHostName}'
