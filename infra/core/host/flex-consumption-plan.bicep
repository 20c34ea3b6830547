// The Flex Consumption hosting plan (FC1). Linux only, so `reserved` is true.

@description('Required. Name of the hosting plan.')
param name string

@description('Required. Azure region of the plan; it must offer Flex Consumption.')
param location string

@description('Optional. Tags applied to the plan.')
param tags object = {}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

@description('Resource id of the plan.')
output id string = plan.id

@description('Name of the plan.')
output name string = plan.name
