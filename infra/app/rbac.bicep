// Every role the Function App's identity holds, in one list. Least privilege: data-plane
// Contributor roles only (no Storage Blob Data Owner, no Storage Account Contributor, nothing that
// can read keys), scoped to the one storage account, plus the right to publish telemetry to the one
// Application Insights component.
//
// Why each role:
// - Storage Blob Data Contributor: Cairn's key/value and archive bytes (it creates its per-tenant
//   containers <base>-<hash> itself, so the scope is the account, not one container), the host's
//   locks and timer state, and the Flex Consumption deployment package.
// - Storage Queue Data Contributor: the Durable task hub's control and work-item queues, and the
//   email-windows queue.
// - Storage Table Data Contributor: the Durable task hub's history and instance tables, and Cairn's
//   indexes and records.
// - Monitoring Metrics Publisher: Application Insights accepts only Entra ID-authenticated telemetry.

@description('Required. Name of the storage account the roles are scoped to.')
param storageAccountName string

@description('Required. Name of the Application Insights component the telemetry role is scoped to.')
param applicationInsightsName string

@description('Required. Principal (object) id of the managed identity that receives the roles.')
param principalId string

// Built-in role definition ids (the same in every tenant).
var roleAssignments = [
  {
    role: 'Storage Blob Data Contributor'
    roleDefinitionId: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
    scope: 'storage'
  }
  {
    role: 'Storage Queue Data Contributor'
    roleDefinitionId: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
    scope: 'storage'
  }
  {
    role: 'Storage Table Data Contributor'
    roleDefinitionId: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
    scope: 'storage'
  }
  {
    role: 'Monitoring Metrics Publisher'
    roleDefinitionId: '3913510d-42f4-4e42-8a64-420c390055eb'
    scope: 'applicationInsights'
  }
]

resource storageAccount 'Microsoft.Storage/storageAccounts@2024-01-01' existing = {
  name: storageAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// A resource loop has one fixed scope, so the list is walked once per scope and each walk keeps
// only its own entries. The names are deterministic (scope, principal, role): redeploying updates
// the same assignments instead of failing with RoleAssignmentExists.
resource storageRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for assignment in roleAssignments: if (assignment.scope == 'storage') {
    name: guid(storageAccount.id, principalId, assignment.roleDefinitionId)
    scope: storageAccount
    properties: {
      description: '${assignment.role} for the Cairn Function App'
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', assignment.roleDefinitionId)
    }
  }
]

resource monitoringRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for assignment in roleAssignments: if (assignment.scope == 'applicationInsights') {
    name: guid(applicationInsights.id, principalId, assignment.roleDefinitionId)
    scope: applicationInsights
    properties: {
      description: '${assignment.role} for the Cairn Function App'
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', assignment.roleDefinitionId)
    }
  }
]

@description('The roles granted, for the deployment log.')
output roles string[] = [for assignment in roleAssignments: assignment.role]
