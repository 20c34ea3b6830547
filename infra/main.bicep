// Cairn on Azure: a Flex Consumption Function App (Node 22) that runs as a user-assigned managed
// identity, a storage account for the Functions host and another for Cairn's data (both reached only
// with Entra ID), a Key Vault for Cairn's secrets, and workspace-based Application Insights.
// Deployed at subscription scope so that `azd up` (or `az deployment sub create`) also creates the
// resource group. See infra/README.md.
targetScope = 'subscription'

@description('Required. Name of the azd environment; the unique suffix of every resource name is derived from it.')
@minLength(1)
@maxLength(64)
param environmentName string

@description('Required. Azure region of every resource. It must offer the Flex Consumption plan.')
@minLength(1)
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Optional. Name of the resource group to create or reuse. Empty: rg-<environmentName>.')
param resourceGroupName string = ''

@description('Optional. CAIRN_BLOB_CONTAINER: base name of the per-tenant blob containers the app creates (<base>-<hash of tenant>).')
@minLength(3)
@maxLength(39)
param blobContainerBase string = 'cairn'

@description('Required. CAIRN_AUTH_AUDIENCE: the aud claim of accepted tokens. With v2.0 tokens (accessTokenAcceptedVersion 2) it is the application (client) id of Cairn\'s app registration; with v1.0 tokens, its Application ID URI (api://...).')
@minLength(1)
param authAudience string

@description('Optional. CAIRN_AUTH_ISSUER: issuer of accepted tokens. Empty: the v2.0 issuer of the deployment tenant (<login endpoint><tenant>/v2.0), right when the app registration has accessTokenAcceptedVersion 2.')
param authIssuer string = ''

@description('Optional. CAIRN_AUTH_JWKS_URI: signing keys of the issuer. Empty: <login endpoint><tenant>/discovery/v2.0/keys of the deployment tenant.')
param authJwksUri string = ''

@description('Optional. CAIRN_AUTH_TENANT_CLAIM: the token claim that names the Cairn tenant.')
param authTenantClaim string = 'oid'

@description('Optional. CAIRN_MAX_VALUE_BYTES: largest key/value value in bytes.')
@minValue(1)
@maxValue(67108864)
param maxValueBytes int = 2097152

@description('Optional. CAIRN_LOG_LEVEL: pino level.')
@allowed([
  'fatal'
  'error'
  'warn'
  'info'
  'debug'
  'trace'
  'silent'
])
param logLevel string = 'info'

@description('Optional. Replication of both storage accounts.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
  'Standard_GRS'
  'Standard_GZRS'
])
param storageSkuName string = 'Standard_LRS'

@description('Optional. Upper bound on the number of Function App instances.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Optional. Object id of whoever sets the Key Vault secrets; it gets Key Vault Secrets Officer on the vault. azd passes the signed-in principal. Empty: nobody; grant the role yourself.')
param vaultOperatorPrincipalId string = ''

@description('Optional. Kind of the principal in vaultOperatorPrincipalId.')
@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param vaultOperatorPrincipalType string = 'User'

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var functionAppName = 'func-cairn-${resourceToken}'
// One container per app for Flex Consumption packages, as in the azd quickstarts (at most 63 chars).
var deploymentStorageContainerName = 'app-package-${take(functionAppName, 32)}-${take(toLower(uniqueString(functionAppName, resourceToken)), 7)}'
// environment() keeps the defaults right in sovereign clouds too (loginEndpoint ends with a slash).
var loginEndpoint = environment().authentication.loginEndpoint
var effectiveAuthIssuer = empty(authIssuer) ? '${loginEndpoint}${tenant().tenantId}/v2.0' : authIssuer
var effectiveAuthJwksUri = empty(authJwksUri) ? '${loginEndpoint}${tenant().tenantId}/discovery/v2.0/keys' : authJwksUri

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: empty(resourceGroupName) ? 'rg-${environmentName}' : resourceGroupName
  location: location
  tags: tags
}

module identity 'core/identity/user-assigned-identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-cairn-${resourceToken}'
    location: location
    tags: tags
  }
}

// The account the Functions host owns: host locks and timer state, the Durable task hub, the
// deployment package. 7-day soft delete lets an operator undo a deleted package or task hub.
module hostStorage 'core/storage/storage-account.bicep' = {
  name: 'hostStorage'
  scope: rg
  params: {
    name: 'sthost${resourceToken}'
    location: location
    tags: tags
    skuName: storageSkuName
    containerNames: [
      deploymentStorageContainerName
    ]
    deleteRetentionDays: 7
  }
}

// Cairn's data. It keeps the name of the single account of earlier versions, so that an upgraded
// deployment keeps its data. Soft delete and versioning stay off (see infra/README.md): what Cairn
// deletes is gone, and every write makes a new ETag without keeping the old bytes.
module dataStorage 'core/storage/storage-account.bicep' = {
  name: 'dataStorage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    skuName: storageSkuName
    // Claimed email windows; created here so the app never needs to create it.
    queueNames: [
      'email-windows'
    ]
    deleteRetentionDays: 0
  }
}

module keyVault 'core/security/key-vault.bicep' = {
  name: 'keyVault'
  scope: rg
  params: {
    name: 'kv-cairn-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'core/monitor/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-cairn-${resourceToken}'
    applicationInsightsName: 'appi-cairn-${resourceToken}'
    location: location
    tags: tags
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  params: {
    hostStorageAccountName: hostStorage.outputs.name
    dataStorageAccountName: dataStorage.outputs.name
    keyVaultName: keyVault.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    principalId: identity.outputs.principalId
    vaultOperatorPrincipalId: vaultOperatorPrincipalId
    vaultOperatorPrincipalType: vaultOperatorPrincipalType
  }
}

module plan 'core/host/flex-consumption-plan.bicep' = {
  name: 'plan'
  scope: rg
  params: {
    name: 'plan-cairn-${resourceToken}'
    location: location
    tags: tags
  }
}

module api 'app/api.bicep' = {
  name: 'api'
  scope: rg
  params: {
    name: functionAppName
    location: location
    tags: tags
    serviceName: 'api'
    appServicePlanId: plan.outputs.id
    hostStorageAccountName: hostStorage.outputs.name
    deploymentStorageContainerName: deploymentStorageContainerName
    dataStorageAccountName: dataStorage.outputs.name
    keyVaultName: keyVault.outputs.name
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    blobContainerBase: blobContainerBase
    authIssuer: effectiveAuthIssuer
    authAudience: authAudience
    authJwksUri: effectiveAuthJwksUri
    authTenantClaim: empty(authTenantClaim) ? 'oid' : authTenantClaim
    maxValueBytes: maxValueBytes
    logLevel: logLevel
    maximumInstanceCount: maximumInstanceCount
  }
  // The roles first: the host reaches storage and resolves its Key Vault references as soon as the
  // app exists, and an app that starts before its roles would fail its first calls.
  dependsOn: [
    rbac
  ]
}

@description('Region of the deployment.')
output AZURE_LOCATION string = location

@description('Entra ID tenant of the deployment.')
output AZURE_TENANT_ID string = tenant().tenantId

@description('Resource group that holds every resource.')
output AZURE_RESOURCE_GROUP string = rg.name

@description('Name of the Function App.')
output AZURE_FUNCTION_APP_NAME string = api.outputs.name

@description('Name of the Function App, under the name azd looks for.')
output SERVICE_API_NAME string = api.outputs.name

@description('Base URL of the Function App; the HTTP API is under /api.')
output SERVICE_API_URI string = api.outputs.uri

@description('Name of the storage account of Cairn\'s data.')
output AZURE_STORAGE_ACCOUNT_NAME string = dataStorage.outputs.name

@description('Primary blob endpoint of the data account (CAIRN_BLOB_ENDPOINT).')
output AZURE_STORAGE_BLOB_ENDPOINT string = dataStorage.outputs.blobEndpoint

@description('Name of the storage account of the Functions host.')
output AZURE_HOST_STORAGE_ACCOUNT_NAME string = hostStorage.outputs.name

@description('Name of the Key Vault whose secrets the app reads (set them with az keyvault secret set).')
output AZURE_KEY_VAULT_NAME string = keyVault.outputs.name

@description('Data-plane URI of the Key Vault.')
output AZURE_KEY_VAULT_ENDPOINT string = keyVault.outputs.uri

@description('Base name of the per-tenant blob containers (CAIRN_BLOB_CONTAINER).')
output CAIRN_BLOB_CONTAINER string = blobContainerBase

@description('Client id of the managed identity the app runs as (AZURE_CLIENT_ID).')
output AZURE_CLIENT_ID string = identity.outputs.clientId

@description('Audience (aud) that accepted tokens carry.')
output CAIRN_AUTH_AUDIENCE string = authAudience

@description('Issuer of accepted tokens.')
output CAIRN_AUTH_ISSUER string = effectiveAuthIssuer

@description('Application Insights connection string (an ingestion endpoint, not a credential).')
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.applicationInsightsConnectionString
