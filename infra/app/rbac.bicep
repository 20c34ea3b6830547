// Every role the Function App's identity holds, each scoped to the one resource it is for. Nothing
// that can read keys or change the accounts (no Storage Account Contributor, no Owner, no Key Vault
// Secrets Officer for the app).
//
// Why each role:
// - Host storage account (the Functions host, its deployment package, the Durable task hub):
//   - Storage Blob Data Owner: what the Functions documentation requires for identity-based host
//     storage (host locks, timer state, the Flex Consumption deployment package, task hub leases
//     and large messages).
//   - Storage Queue Data Contributor: the task hub's control and work-item queues.
//   - Storage Table Data Contributor: the task hub's history and instance tables.
// - Data storage account (Cairn's data): the least that Cairn does there.
//   - Storage Blob Data Contributor: key/value and archive bytes; Cairn creates its per-tenant
//     containers <base>-<hash> itself, so the scope is the account, not one container.
//   - Storage Queue Data Contributor: the email-windows queue.
//   - Storage Table Data Contributor: the session index and Cairn's other records.
// - Key Vault: Key Vault Secrets User, to resolve the app settings that are Key Vault references.
// - Application Insights: Monitoring Metrics Publisher, as telemetry is accepted only with an Entra
//   ID token.
// The operator who sets the secrets may get Key Vault Secrets Officer on the vault (optional).

@description('Required. Name of the storage account of the Functions host.')
param hostStorageAccountName string

@description('Required. Name of the storage account of Cairn\'s data.')
param dataStorageAccountName string

@description('Required. Name of the Key Vault that holds Cairn\'s secrets.')
param keyVaultName string

@description('Required. Name of the Application Insights component the telemetry role is scoped to.')
param applicationInsightsName string

@description('Required. Principal (object) id of the managed identity that the Function App runs as.')
param principalId string

@description('Optional. Object id of the person, group or service principal who sets the Key Vault secrets (Key Vault Secrets Officer on the vault). Empty: nobody; grant it yourself.')
param vaultOperatorPrincipalId string = ''

@description('Optional. Kind of the principal in vaultOperatorPrincipalId.')
@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param vaultOperatorPrincipalType string = 'User'

// Built-in role definition ids (the same in every tenant).
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  keyVaultSecretsOfficer: 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

var hostStorageRoles = [
  roles.storageBlobDataOwner
  roles.storageQueueDataContributor
  roles.storageTableDataContributor
]

var dataStorageRoles = [
  roles.storageBlobDataContributor
  roles.storageQueueDataContributor
  roles.storageTableDataContributor
]

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

// The names are deterministic (scope, principal, role): redeploying updates the same assignments
// instead of failing with RoleAssignmentExists.
resource hostStorageRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in hostStorageRoles: {
    name: guid(hostStorageAccount.id, principalId, roleId)
    scope: hostStorageAccount
    properties: {
      description: 'Functions host storage for the Cairn Function App'
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]

resource dataStorageRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in dataStorageRoles: {
    name: guid(dataStorageAccount.id, principalId, roleId)
    scope: dataStorageAccount
    properties: {
      description: 'Cairn data for the Cairn Function App'
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]

resource secretsUserRoleAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(keyVault.id, principalId, roles.keyVaultSecretsUser)
  scope: keyVault
  properties: {
    description: 'Key Vault references of the Cairn Function App'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)
  }
}

resource secretsOfficerRoleAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(vaultOperatorPrincipalId)) {
  name: guid(keyVault.id, vaultOperatorPrincipalId, roles.keyVaultSecretsOfficer)
  scope: keyVault
  properties: {
    description: 'Sets the secrets of the Cairn deployment'
    principalId: vaultOperatorPrincipalId
    principalType: vaultOperatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsOfficer)
  }
}

resource monitoringRoleAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, roles.monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    description: 'Telemetry of the Cairn Function App'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
  }
}
