// Log Analytics and workspace-based Application Insights. Local (instrumentation key) authentication
// is disabled: telemetry is accepted only with an Entra ID token, which the Function App obtains with
// its managed identity (APPLICATIONINSIGHTS_AUTHENTICATION_STRING) and the Monitoring Metrics
// Publisher role.

@description('Required. Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Required. Name of the Application Insights component.')
param applicationInsightsName string

@description('Required. Azure region of both resources.')
param location string

@description('Optional. Tags applied to both resources.')
param tags object = {}

@description('Optional. Days the workspace keeps logs.')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    IngestionMode: 'LogAnalytics'
    DisableLocalAuth: true
  }
}

@description('Name of the Application Insights component.')
output applicationInsightsName string = applicationInsights.name

@description('Resource id of the Application Insights component.')
output applicationInsightsId string = applicationInsights.id

@description('Application Insights connection string: an ingestion endpoint and instrumentation key, not a credential (local auth is disabled).')
output applicationInsightsConnectionString string = applicationInsights.properties.ConnectionString

@description('Resource id of the Log Analytics workspace.')
output logAnalyticsId string = logAnalytics.id
