// A storage account of a Cairn deployment; main.bicep deploys it twice. The host account holds what
// the Functions host needs (host locks and timer state in blob, the Durable task hub in queues and
// tables, the Flex Consumption deployment package); the data account holds Cairn's own data (one
// blob container per tenant, created by the app; tables; the `email-windows` queue). Only Entra ID
// reaches either: shared keys and anonymous reads are off.

@description('Required. Globally unique storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Required. Azure region of the account.')
param location string

@description('Optional. Tags applied to every resource of this module.')
param tags object = {}

@description('Optional. Replication of the account. LRS is the cheapest; ZRS survives the loss of one zone.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
  'Standard_GRS'
  'Standard_GZRS'
])
param skuName string = 'Standard_LRS'

@description('Optional. Blob containers to create up front (the app and the Functions host create the rest themselves).')
param containerNames string[] = []

@description('Optional. Queues to create up front (the app and the Functions host create the rest themselves).')
param queueNames string[] = []

@description('Optional. Days a deleted blob or container stays recoverable; 0 turns soft delete off (data that is deleted is then gone at once).')
@minValue(0)
@maxValue(365)
param deleteRetentionDays int = 0

resource storageAccount 'Microsoft.Storage/storageAccounts@2024-01-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    // Every caller (host, app, deployment) authenticates with Entra ID; a key would be a secret to leak.
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

// Written out even where off: Azure's defaults have changed over time, and a setting left to them is
// a setting nobody decided.
var softDelete = deleteRetentionDays > 0
  ? {
      enabled: true
      // max() only tells the compiler what the condition above already ensures (days >= 1).
      days: max(deleteRetentionDays, 1)
    }
  : {
      enabled: false
    }

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2024-01-01' = {
  parent: storageAccount
  name: 'default'
  properties: {
    // No versioning: Cairn's ETags and immutable objects are the history it needs, and a version kept
    // of every overwrite would keep data that Cairn deleted (see infra/README.md).
    isVersioningEnabled: false
    deleteRetentionPolicy: softDelete
    containerDeleteRetentionPolicy: softDelete
  }
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2024-01-01' = [
  for containerName in containerNames: {
    parent: blobService
    name: containerName
    properties: {
      publicAccess: 'None'
    }
  }
]

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2024-01-01' = {
  parent: storageAccount
  name: 'default'
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices/queues@2024-01-01' = [
  for queueName in queueNames: {
    parent: queueService
    name: queueName
  }
]

@description('Name of the storage account.')
output name string = storageAccount.name

@description('Resource id of the storage account.')
output id string = storageAccount.id

@description('Primary blob endpoint, with a trailing slash.')
output blobEndpoint string = storageAccount.properties.primaryEndpoints.blob

@description('Primary queue endpoint.')
output queueEndpoint string = storageAccount.properties.primaryEndpoints.queue

@description('Primary table endpoint.')
output tableEndpoint string = storageAccount.properties.primaryEndpoints.table
