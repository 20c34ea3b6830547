// The identity the Function App runs as. User-assigned rather than system-assigned so that its role
// assignments can be granted before the app exists (no window in which the app starts without access)
// and so that its client id can be written into the app settings in the same deployment.

@description('Required. Name of the user-assigned managed identity.')
param name string

@description('Required. Azure region of the identity.')
param location string

@description('Optional. Tags applied to the identity.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

@description('Name of the identity.')
output name string = identity.name

@description('Resource id of the identity (for the Function App identity block and deployment storage).')
output id string = identity.id

@description('Client (application) id of the identity: AZURE_CLIENT_ID and AzureWebJobsStorage__clientId.')
output clientId string = identity.properties.clientId

@description('Principal (object) id of the identity: the subject of its role assignments.')
output principalId string = identity.properties.principalId
