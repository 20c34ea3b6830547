// The one storage account of a Cairn deployment. It holds Cairn's own data (one blob container per
// tenant, created by the app; tables; the `email-windows` queue) and everything the Functions host
// needs (host locks and timers in blob, the Durable task hub in queues and tables, the Flex
// Consumption deployment package). Only Entra ID reaches it: shared keys and anonymous reads are off.

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

@description('Required. Name of the blob container that receives the Flex Consumption deployment package.')
@minLength(3)
@maxLength(63)
param deploymentContainerName string

@description('Optional. Queues to create up front (the app and the Functions host create the rest themselves).')
param queueNames string[] = []

@description('Optional. Days a deleted blob or container stays recoverable. Cairn deletes keys on request; this is the window in which an operator can undo a mistake.')
@minValue(1)
@maxValue(365)
param deleteRetentionDays int = 7

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

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2024-01-01' = {
  parent: storageAccount
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: deleteRetentionDays
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: deleteRetentionDays
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2024-01-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

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
