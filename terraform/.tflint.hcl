# tflint configuration for scripts/check-deploy.sh: only the core Terraform
# ruleset, which is built into tflint and runs offline. The google ruleset
# plugin is deliberately not enabled (it must be downloaded, and provider
# facts are checked by deploy_test/ instead).
config {
  call_module_type = "none"
}

plugin "terraform" {
  enabled = true
  preset  = "recommended"
}

# Beyond the recommended preset: every variable and output documented,
# names in snake_case.
rule "terraform_documented_variables" {
  enabled = true
}

rule "terraform_documented_outputs" {
  enabled = true
}

rule "terraform_naming_convention" {
  enabled = true
}

rule "terraform_standard_module_structure" {
  enabled = true
}
