# Inputs of the lrosink deployment. Every variable has a description, a type
# and, where a wrong value would only fail at apply time (or, worse, deploy a
# service that fails at start-up), a validation.
#
# Nothing here is a secret: secret VALUES never pass through Terraform (they
# would land in the state). Terraform creates the Secret Manager secrets; the
# operator adds their versions (docs/DEPLOY.md).

variable "project_id" {
  description = "ID of the Google Cloud project lrosink is deployed into (it must exist and have billing enabled)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 characters: lowercase letters, digits, hyphens), not a project name or number."
  }
}

variable "region" {
  description = "Region of the Cloud Run services, the Artifact Registry repository, the Cloud Scheduler job and the build source bucket."
  type        = string
  default     = "europe-west1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a region such as europe-west1 or us-central1 (not a zone)."
  }
}

variable "firestore_database" {
  description = "ID of the Firestore database holding the ledger (LROSINK_FIRESTORE_DATABASE). null: \"(default)\" with the default name_prefix (where deployments before this variable kept it), NAME_PREFIX-ledger with any other, so that a second instance in the project gets a database of its own. Cannot be changed after creation (docs/DEPLOY.md, \"Two instances in one project\")."
  type        = string
  default     = null

  validation {
    condition     = var.firestore_database == null || can(regex("^(\\(default\\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or a database ID: 4-63 lowercase letters, digits and hyphens, starting with a letter, not ending with a hyphen."
  }
}

variable "firestore_location" {
  description = "Location of the lrosink Firestore databases: a region (e.g. europe-west1) or a multi-region (eur3, nam5). null means var.region. Cannot be changed after creation."
  type        = string
  default     = null

  validation {
    condition     = var.firestore_location == null || can(regex("^([a-z]+-[a-z]+[0-9]+|eur3|nam5|nam7)$", var.firestore_location))
    error_message = "firestore_location must be a region (europe-west1) or a Firestore multi-region (eur3, nam5, nam7)."
  }
}

variable "firestore_point_in_time_recovery" {
  description = "Keep 7 days of point-in-time recovery for the Firestore database (the ledger is the source of truth of what was delivered)."
  type        = bool
  default     = true
}

variable "name_prefix" {
  description = "Prefix of every resource name (services, service accounts, topics, secrets, the image repository, the Firestore database, metrics, alerts). A second instance in the same project takes another prefix; every name derives from it unless set explicitly (docs/DEPLOY.md, \"Two instances in one project\")."
  type        = string
  default     = "lrosink"

  validation {
    # Service account ids are at most 30 characters and the longest suffix
    # used is "-scheduler" (10): keep the prefix to 16.
    condition     = can(regex("^[a-z][a-z0-9-]{0,14}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2-16 characters: lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "image" {
  description = "Container image of the FIRST revision of every service of local.services (run.tf) (built from the Dockerfile, e.g. REGION-docker.pkg.dev/PROJECT/lrosink/lrosink:TAG). Later images are rolled out by Cloud Build (cloudbuild.yaml); Terraform ignores image changes after creation."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})$", var.image))
    error_message = "image must be a full image reference with a tag or digest, e.g. europe-west1-docker.pkg.dev/my-project/lrosink/lrosink:bootstrap."
  }
}

variable "artifact_repository_id" {
  description = "ID of the Artifact Registry Docker repository holding the lrosink image. null: name_prefix."
  type        = string
  default     = null

  validation {
    condition     = var.artifact_repository_id == null || can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.artifact_repository_id))
    error_message = "artifact_repository_id must be lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "results_topic" {
  description = "Name (not full path) of the Pub/Sub topic receiving one results message per operation (CONTRACT.md §6). null: NAME_PREFIX-results."
  type        = string
  default     = null

  validation {
    condition     = var.results_topic == null || can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.results_topic)) && !startswith(coalesce(var.results_topic, "x"), "goog")
    error_message = "results_topic must be a Pub/Sub topic name: 3-255 characters, starting with a letter, not starting with goog."
  }
}

variable "results_subscription" {
  description = "Name of the example pull subscription on the results topic, for a worker like examples/worker (exactly-once, ordered, with a dead-letter topic). null: NAME_PREFIX-results-worker."
  type        = string
  default     = null

  validation {
    condition     = var.results_subscription == null || can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.results_subscription)) && !startswith(coalesce(var.results_subscription, "x"), "goog")
    error_message = "results_subscription must be a Pub/Sub subscription name: 3-255 characters, starting with a letter, not starting with goog."
  }
}

variable "results_subscribers" {
  description = "IAM members (e.g. serviceAccount:worker@PROJECT.iam.gserviceaccount.com) allowed to pull from the results subscription."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.results_subscribers : can(regex("^(serviceAccount|user|group|principal|principalSet):", m))])
    error_message = "results_subscribers entries must be IAM members such as serviceAccount:NAME@PROJECT.iam.gserviceaccount.com (allUsers/allAuthenticatedUsers are refused)."
  }
}

variable "dead_letter_max_delivery_attempts" {
  description = "Deliveries of a results message to the worker subscription before it is moved to the dead-letter topic."
  type        = number
  default     = 10

  validation {
    condition     = var.dead_letter_max_delivery_attempts >= 5 && var.dead_letter_max_delivery_attempts <= 100 && floor(var.dead_letter_max_delivery_attempts) == var.dead_letter_max_delivery_attempts
    error_message = "dead_letter_max_delivery_attempts must be an integer between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "webhook_secret_id" {
  description = "Secret Manager secret ID holding LROSINK_WEBHOOK_SECRETS (comma-separated whsec_ secrets). Terraform creates the secret, never a version. null: NAME_PREFIX-webhook-secrets."
  type        = string
  default     = null

  validation {
    condition     = var.webhook_secret_id == null || can(regex("^[A-Za-z0-9_-]{1,255}$", var.webhook_secret_id))
    error_message = "webhook_secret_id must be 1-255 letters, digits, hyphens or underscores."
  }
}

variable "gemini_api_key_secret_id" {
  description = "Secret Manager secret ID holding the Gemini API key of the Reconcile and Webhook services (GEMINI_API_KEY). Terraform creates the secret, never a version. null: \"gemini-api-key\" with the default name_prefix (the name deployments before this default kept), NAME_PREFIX-gemini-api-key with any other."
  type        = string
  default     = null

  validation {
    condition     = var.gemini_api_key_secret_id == null || can(regex("^[A-Za-z0-9_-]{1,255}$", var.gemini_api_key_secret_id))
    error_message = "gemini_api_key_secret_id must be 1-255 letters, digits, hyphens or underscores."
  }
}

variable "jwt_audience" {
  description = "LROSINK_JWT_AUDIENCE: if set, the required `aud` of dynamic-webhook tokens. Empty leaves it unset."
  type        = string
  default     = ""
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channel names (projects/PROJECT/notificationChannels/ID) notified by the alert policies. Empty: alerts open incidents but notify nobody."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels entries must be full names: projects/PROJECT/notificationChannels/ID."
  }
}

variable "reconcile_schedule" {
  description = "Cron schedule (5 fields) of the Cloud Scheduler job calling the Reconcile service."
  type        = string
  default     = "*/2 * * * *"

  validation {
    condition     = length(regexall("[^ ]+", var.reconcile_schedule)) == 5
    error_message = "reconcile_schedule must be a 5-field cron expression such as \"*/2 * * * *\"."
  }
}

variable "reconcile_time_zone" {
  description = "Time zone (tz database name) of reconcile_schedule."
  type        = string
  default     = "Etc/UTC"
}

variable "reconcile_attempt_deadline" {
  description = "How long Cloud Scheduler waits for one Reconcile pass (also the Reconcile service's request timeout). HTTP targets allow 15s to 1800s."
  type        = string
  default     = "300s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.reconcile_attempt_deadline)) && try(tonumber(trimsuffix(var.reconcile_attempt_deadline, "s")) >= 15 && tonumber(trimsuffix(var.reconcile_attempt_deadline, "s")) <= 1800, false)
    error_message = "reconcile_attempt_deadline must be seconds between 15s and 1800s, e.g. 300s."
  }
}

variable "grace" {
  description = "LROSINK_GRACE: a pending operation is not polled by Reconcile until this long after submission (Go duration)."
  type        = string
  default     = "90s"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$", var.grace)) && !can(regex("^(0+(\\.0+)?(ns|us|ms|s|m|h))+$", var.grace))
    error_message = "grace must be a positive Go duration such as 90s, 2m or 1h30m."
  }
}

variable "stuck_after" {
  description = "LROSINK_STUCK_AFTER: an operation pending longer than this is reported stuck (ERROR log, alert); it is never auto-closed (Go duration)."
  type        = string
  default     = "6h"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$", var.stuck_after)) && !can(regex("^(0+(\\.0+)?(ns|us|ms|s|m|h))+$", var.stuck_after))
    error_message = "stuck_after must be a positive Go duration such as 6h or 90m."
  }
}

variable "claim_lease" {
  description = "LROSINK_CLAIM_LEASE: a results claim not committed DONE within this is seized by the next attempt (Go duration). Keep it well above the Webhook request timeout."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$", var.claim_lease)) && !can(regex("^(0+(\\.0+)?(ns|us|ms|s|m|h))+$", var.claim_lease))
    error_message = "claim_lease must be a positive Go duration such as 10m."
  }
}

variable "max_instances" {
  description = "Maximum Cloud Run instances per service. Reconcile passes are bounded and safe to overlap; Reconcile gets at least 2 with one shard (a pass, and a console action beside it) and N + 2 with reconcile_shards = N > 1 (the coordinator and each shard pass on an instance of its own, and a console action), more if set here."
  type = object({
    webhook   = number
    reconcile = number
    register  = number
    console   = optional(number, 2)
  })
  default = {
    webhook   = 20
    reconcile = 1
    register  = 10
    console   = 2
  }

  validation {
    condition     = alltrue([for n in values(var.max_instances) : n >= 1 && n <= 1000])
    error_message = "max_instances values must be between 1 and 1000."
  }
}

variable "private_ingress" {
  description = "Ingress of the Reconcile, Register and Console services, which are protected by IAM (run.invoker) either way. INGRESS_TRAFFIC_ALL lets submitters outside Google Cloud call Register; INGRESS_TRAFFIC_INTERNAL_ONLY / _INTERNAL_LOAD_BALANCER also close the network path, and then the console's actions, which the Console service sends to Reconcile's run.app URL without VPC egress (none is configured here), are refused at Reconcile's ingress: the console says their outcome is unknown."
  type        = string
  default     = "INGRESS_TRAFFIC_ALL"

  validation {
    condition     = contains(["INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"], var.private_ingress)
    error_message = "private_ingress must be INGRESS_TRAFFIC_ALL, INGRESS_TRAFFIC_INTERNAL_ONLY or INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER."
  }
}

variable "register_invokers" {
  description = "IAM members allowed to call the Register service (the job submitters), e.g. serviceAccount:submitter@PROJECT.iam.gserviceaccount.com. Register is never public."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.register_invokers : can(regex("^(serviceAccount|user|group|principal|principalSet):", m))])
    error_message = "register_invokers entries must be IAM members such as serviceAccount:NAME@PROJECT.iam.gserviceaccount.com; allUsers and allAuthenticatedUsers are refused (Register is not public)."
  }
}

variable "console_invokers" {
  description = "IAM members allowed to open the read-only Console service (operators), e.g. user:ops@example.com or group:oncall@example.com. The Console is never public: operators reach it with `gcloud run services proxy` (docs/OPERATIONS.md)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.console_invokers : can(regex("^(serviceAccount|user|group|principal|principalSet):", m))])
    error_message = "console_invokers entries must be IAM members such as user:NAME@example.com; allUsers and allAuthenticatedUsers are refused (the Console is not public)."
  }
}

variable "deletion_protection" {
  description = "Deletion protection of the Cloud Run services and the Secret Manager secrets: while true, `terraform destroy` (or a replacement) of one of them fails. Tearing down on purpose: docs/DEPLOY.md, \"Tearing down\"."
  type        = bool
  default     = true
}

variable "webhook_public_access" {
  description = "How the Webhook service is made public (Gemini cannot present Google credentials; every delivery is authenticated by its signature). \"invoker-iam-disabled\": Cloud Run's invoker IAM check is disabled on that service (Cloud Run's recommended way; works where the domain-restricted-sharing organization policy forbids allUsers). \"allUsers\": roles/run.invoker granted to allUsers."
  type        = string
  default     = "invoker-iam-disabled"

  validation {
    condition     = contains(["invoker-iam-disabled", "allUsers"], var.webhook_public_access)
    error_message = "webhook_public_access must be \"invoker-iam-disabled\" or \"allUsers\"."
  }
}

variable "secret_replica_locations" {
  description = "Regions holding the Secret Manager secrets' replicas (user-managed replication), e.g. [\"europe-west1\"]. Empty: automatic replication, which an organization policy restricting resource locations (gcp.resourceLocations) refuses. Cannot be changed after creation without re-creating the secrets."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for l in var.secret_replica_locations : can(regex("^[a-z]+-[a-z]+[0-9]+$", l))])
    error_message = "secret_replica_locations entries must be regions such as europe-west1."
  }
}

variable "build_trigger" {
  description = "The Cloud Build trigger running cloudbuild.yaml (tests, image build and push, under the build account) on every push to a branch, for a repository connected to Cloud Build (2nd gen): repository = projects/PROJECT/locations/REGION/connections/CONNECTION/repositories/REPO, branch = a regular expression (default ^main$). null: no trigger; builds are submitted by hand (docs/DEPLOY.md)."
  type = object({
    repository = string
    branch     = optional(string, "^main$")
  })
  default = null

  validation {
    condition     = var.build_trigger == null || can(regex("^projects/[^/]+/locations/[^/]+/connections/[^/]+/repositories/[^/]+$", var.build_trigger.repository))
    error_message = "build_trigger.repository must be a Cloud Build repository: projects/PROJECT/locations/REGION/connections/CONNECTION/repositories/REPO."
  }
}

variable "rollout_approval_required" {
  description = "Hold each rollout (the image Cloud Build pushed, going out to every service under the deployer account) until someone with roles/cloudbuild.builds.approver approves it (gcloud builds approve). false: every pushed image rolls out at once, so whatever could push an image (the build account running the tests' dependencies) could deploy it."
  type        = bool
  default     = true
}

variable "rollout_approvers" {
  description = "IAM members who may approve or reject a held rollout (roles/cloudbuild.builds.approver on the project), e.g. group:release@example.com. Project Owners can anyway."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.rollout_approvers : can(regex("^(serviceAccount|user|group|principal|principalSet):", m))])
    error_message = "rollout_approvers entries must be IAM members such as group:release@example.com (allUsers and allAuthenticatedUsers are refused)."
  }
}

variable "image_keep_count" {
  description = "Artifact Registry cleanup: the most recent image versions always kept (rollback candidates); older versions are deleted once 30 days old."
  type        = number
  default     = 10

  validation {
    condition     = var.image_keep_count >= 1 && floor(var.image_keep_count) == var.image_keep_count
    error_message = "image_keep_count must be a positive integer."
  }
}

variable "consumer_processed_collection" {
  description = "Firestore collection where consume.NewFirestoreStore keeps a worker's processed records, in the consumer database (see separate_consumer_database); Terraform adds the TTL policy on its expire_at field and grants the results_subscribers roles/datastore.user on that database only. Empty: neither (the worker keeps its records elsewhere)."
  type        = string
  default     = "processed"

  validation {
    condition     = var.consumer_processed_collection == "" || can(regex("^[A-Za-z0-9_-]{1,100}$", var.consumer_processed_collection))
    error_message = "consumer_processed_collection must be a collection id (letters, digits, _ and -) or empty."
  }
}

variable "separate_consumer_database" {
  description = "Keep the workers' processed records in a Firestore database of their own (NAME_PREFIX-consumer, created here), so that the results_subscribers' grant reaches no ledger document. false: they share the ledger database (examples/worker opens (default)), and their roles/datastore.user on it lets them read and write the ledger (docs/DEPLOY.md, \"Firestore access\")."
  type        = bool
  default     = false
}

variable "reconcile_absent_after" {
  description = "Alert when no reconcile pass has been logged for this long (a metric-absence condition, 120s to 84600s): Cloud Scheduler stopped calling, or every pass fails before its end."
  type        = string
  default     = "1200s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.reconcile_absent_after)) && try(tonumber(trimsuffix(var.reconcile_absent_after, "s")) >= 120 && tonumber(trimsuffix(var.reconcile_absent_after, "s")) <= 84600, false)
    error_message = "reconcile_absent_after must be seconds between 120s and 84600s, e.g. 1200s."
  }
}

variable "retention" {
  description = "LROSINK_RETENTION: keep a settled operation this long after settlement (days such as \"400d\", at least 7d), then Firestore's TTL policy deletes it; \"\" keeps operations for ever. A delivery or replay for a deleted operation is a first sighting again."
  type        = string
  default     = ""

  validation {
    condition     = var.retention == "" || try(can(regex("^[0-9]+d$", var.retention)) && tonumber(trimsuffix(var.retention, "d")) >= 7 && tonumber(trimsuffix(var.retention, "d")) <= 36500, false)
    error_message = "retention must be \"\" (keep for ever) or whole days from 7 to 36500, e.g. \"400d\"."
  }
}

variable "gemini_qps" {
  description = "LROSINK_GEMINI_QPS: Gemini requests a second Reconcile may send (retries included), shared out among the passes running at once; each Webhook instance confirms dynamic-webhook hints within a budget of the same size and answers 503 gemini-budget-spent when it is spent; \"0\" is unlimited. Keep it under your project's Gemini quota less what submitters use: a budget too small shows as reconcile lateness (and hint 503s), not errors."
  type        = string
  default     = "0"

  validation {
    condition     = can(tonumber(var.gemini_qps)) && try(tonumber(var.gemini_qps) >= 0 && tonumber(var.gemini_qps) <= 1000000, false)
    error_message = "gemini_qps must be a number of requests a second from 0 (unlimited) to 1000000."
  }
}

variable "reconcile_shards" {
  description = "LROSINK_RECONCILE_SHARDS: how many shard passes one reconcile tick runs in parallel (1 to 64). Above 1 the Scheduler's call publishes one shard request per bucket range to the fan-out topic and a push subscription runs each on its own Reconcile instance (fanout.tf); gemini_qps is shared out among them. Size it from the due checks a tick must do (docs/DEPLOY.md, \"Sizing shards\")."
  type        = number
  default     = 1

  validation {
    condition     = var.reconcile_shards >= 1 && var.reconcile_shards <= 64 && floor(var.reconcile_shards) == var.reconcile_shards
    error_message = "reconcile_shards must be a whole number from 1 to 64 (the virtual buckets)."
  }
}

variable "reconcile_late_after" {
  description = "Alert when a reconcile pass leaves an operation due for longer than this (its oldest_overdue_seconds), in seconds: a few pass intervals (default: five passes of the default */2 schedule; scale it with reconcile_schedule)."
  type        = string
  default     = "600s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.reconcile_late_after)) && try(tonumber(trimsuffix(var.reconcile_late_after, "s")) >= 60, false)
    error_message = "reconcile_late_after must be seconds, at least 60s, e.g. 600s."
  }
}

variable "runbook_url" {
  description = "Where the alert policies' documentation points for the runbook: docs/OPERATIONS.md as your team reads it, e.g. https://github.com/ORG/lrosink/blob/main/docs/OPERATIONS.md (each alert appends #its-section)."
  type        = string
  default     = "docs/OPERATIONS.md"

  validation {
    condition     = !strcontains(var.runbook_url, "#")
    error_message = "runbook_url must not contain '#': each alert appends the anchor of its section."
  }
}
