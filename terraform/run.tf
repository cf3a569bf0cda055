# The Cloud Run services, ONE list of them (local.services), with what each
# reads and publishes. The services, their runtime accounts and their
# ledger, topic and secret grants (iam.tf), their invoker bindings (below),
# the rollout's grants and steps (build.tf) and the outputs are all derived
# from it with for_each, so adding a service cannot miss a grant.
#
# All run ONE image (cmd/server, FUNCTION_TARGET routing): FUNCTION_TARGET
# selects the function served at "/".
#
# Image ownership: Terraform creates each service with var.image; after that
# Cloud Build rolls out new images (`gcloud run services update --image`,
# cloudbuild.yaml). lifecycle.ignore_changes on the image (and on client /
# client_version, which gcloud stamps on every update) keeps `terraform
# apply` from rolling a service back to var.image or showing a perpetual
# diff. Everything else (env, secrets, service account, scaling) stays owned
# by Terraform: an apply after a Cloud Build rollout creates a new revision
# with the new settings and the image Cloud Build deployed.

locals {
  results_topic_path = "projects/${var.project_id}/topics/${google_pubsub_topic.results.name}"

  # Configuration shared by the services (CONTRACT.md §2). Same values
  # everywhere, so any function behaves the same whichever service runs it.
  common_env = {
    LROSINK_STORE              = "firestore"
    LROSINK_FIRESTORE_DATABASE = google_firestore_database.default.name
    GOOGLE_CLOUD_PROJECT       = var.project_id
    LROSINK_RESULTS            = "pubsub:${local.results_topic_path}"
    LROSINK_GRACE              = var.grace
    LROSINK_STUCK_AFTER        = var.stuck_after
    LROSINK_CLAIM_LEASE        = var.claim_lease
    # Every service settles operations, so each writes expire_at.
    LROSINK_RETENTION = var.retention
  }

  # A pass must end (and answer) before Cloud Scheduler gives up on it, or
  # every slow pass counts as a failed attempt and is retried on top of
  # itself: 30 s below the attempt deadline (a fifth below, for short ones).
  reconcile_attempt_seconds = tonumber(trimsuffix(var.reconcile_attempt_deadline, "s"))
  reconcile_deadline        = "${max(local.reconcile_attempt_seconds - 30, floor(local.reconcile_attempt_seconds * 0.8))}s"

  # What a service has unless its entry in local.services says otherwise:
  # IAM-protected (no invoker but those listed), request-based billing, the
  # common configuration, no secret, no topic.
  service_defaults = {
    ingress              = var.private_ingress
    invokers             = {}
    invoker_iam_disabled = false
    concurrency          = 80
    timeout              = "30s"
    cpu_idle             = true
    memory               = "512Mi"
    env                  = local.common_env
    secrets              = []
    publishes            = []
    calls                = []
  }

  # The topics a service may publish to, by the names local.services uses.
  topics = {
    results          = google_pubsub_topic.results
    reconcile_fanout = google_pubsub_topic.reconcile_fanout
  }

  # THE list of services, each entry merged over local.service_defaults:
  #   target        FUNCTION_TARGET (the function served at "/")
  #   description   of the service and of its runtime account
  #   ingress       network path; every service but the Webhook is IAM-protected
  #   invokers      name => IAM member granted roles/run.invoker
  #   invoker_iam_disabled  public without IAM (Webhook only, see var.webhook_public_access)
  #   concurrency, timeout, cpu_idle, memory, max_instances
  #   env           plain env vars
  #   ledger        the account's access to the ledger database: "write"
  #                 (roles/datastore.user) or "read" (roles/datastore.viewer)
  #   publishes     keys of local.topics its account may publish to
  #   calls         keys of local.services its account may invoke
  #                 (roles/run.invoker on those services only, in their
  #                 binding below), each URL passed as LROSINK_<KEY>_URL
  #   secrets       keys of local.secrets (secrets.tf) it reads, each as the
  #                 env var named there, from Secret Manager
  services = { for k, s in {
    webhook = {
      target      = "Webhook"
      description = "lrosink Webhook: Gemini completion webhooks (public; deliveries are authenticated by signature)"
      # Gemini calls it from the internet and cannot present Google
      # credentials; authentication is the webhook signature (Standard
      # Webhooks HMAC or JWT), checked on the raw body before the ledger is
      # touched. Public either by disabling the invoker IAM check (works
      # under domain-restricted sharing) or by allUsers.
      ingress              = "INGRESS_TRAFFIC_ALL"
      invoker_iam_disabled = var.webhook_public_access == "invoker-iam-disabled"
      invokers             = var.webhook_public_access == "allUsers" ? { allUsers = "allUsers" } : {}
      timeout              = "60s"
      # false (CPU always allocated, instance-based billing): a delivery
      # the door has not finished within LROSINK_WEBHOOK_DEADLINE is
      # answered 503 deadline-exceeded while the door's work goes on
      # detached (it commits, publishes or releases its claim). With
      # request-based billing Cloud Run throttles the CPU once the answer
      # is sent, so that work would crawl and its claim stay held until the
      # lease ran out.
      cpu_idle      = false
      max_instances = var.max_instances.webhook
      # LROSINK_GEMINI_QPS: a hint's confirmation draws from the budget and
      # never waits for it (503 gemini-budget-spent); each instance has its
      # own budget (docs/OPERATIONS.md, "Replays and the Gemini budget").
      env = merge(local.common_env, { LROSINK_GEMINI_QPS = var.gemini_qps }, var.jwt_audience == "" ? {} : {
        LROSINK_JWT_AUDIENCE = var.jwt_audience
      })
      ledger    = "write"
      publishes = ["results"]
      # GEMINI_API_KEY: a dynamic-webhook (v1a or JWT) delivery is a hint,
      # signed with keys every Gemini project shares; the door confirms its
      # state with Gemini before applying it. Without the key, every dynamic
      # terminal waits for Reconcile's polling, and a replay of another
      # project's delivery is stored and later reported stuck.
      secrets = ["webhook", "gemini_api_key"]
    }
    reconcile = {
      target      = "Reconcile"
      description = "lrosink Reconcile: one bounded pass over overdue operations and owed publishes (called by Cloud Scheduler)"
      # The Cloud Scheduler account (scheduler.tf) and the fan-out push
      # subscription's (fanout.tf).
      invokers = {
        scheduler = google_service_account.scheduler.member
        fanout    = google_service_account.reconcile_fanout.member
      }
      # One pass per instance at a time; passes are bounded and fenced, so
      # an overlap (a slow pass meeting the next tick) is safe, just wasteful.
      # Sharded, a tick runs the coordinator and reconcile_shards shard
      # passes at once, each on its own instance: never fewer instances.
      # One more for an operator's console action (the Console calls it),
      # which would otherwise wait for a pass of minutes to end.
      concurrency   = 1
      timeout       = var.reconcile_attempt_deadline
      max_instances = max(var.max_instances.reconcile, var.reconcile_shards > 1 ? var.reconcile_shards + 2 : 2)
      env = merge(local.common_env, {
        LROSINK_RECONCILE_DEADLINE     = local.reconcile_deadline
        LROSINK_GEMINI_QPS             = var.gemini_qps
        LROSINK_RECONCILE_SHARDS       = tostring(var.reconcile_shards)
        LROSINK_RECONCILE_FANOUT_TOPIC = local.reconcile_fanout_topic_path
      })
      ledger = "write"
      # The coordinator hands shard passes out on the fan-out topic.
      publishes = ["results", "reconcile_fanout"]
      secrets   = ["gemini_api_key"]
    }
    register = {
      target        = "Register"
      description   = "lrosink Register: submitters record operations as PENDING (IAM-protected)"
      invokers      = { for m in var.register_invokers : m => m }
      max_instances = var.max_instances.register
      # Registering an operation never settles it: Register never publishes.
      ledger = "write"
    }
    console = {
      target      = "Console"
      description = "lrosink Console: the read-only operations console at /ui/ (IAM-protected; reach it with gcloud run services proxy)"
      # Operators, through `gcloud run services proxy`, which adds their
      # identity token.
      invokers      = { for m in var.console_invokers : m => m }
      concurrency   = 20
      memory        = "256Mi"
      max_instances = var.max_instances.console
      # Read-only: it cannot change an operation or a claim even if its
      # handler had a bug. Its actions (Replay, Check now, Publish now)
      # are carried out by the Reconcile service, which it calls as itself
      # (run.invoker there, nothing else): LROSINK_RECONCILE_URL.
      ledger = "read"
      calls  = ["reconcile"]
      env    = merge(local.common_env, { LROSINK_RECONCILE_URL = local.reconcile_url })
    }
  } : k => merge(local.service_defaults, s) }

  # The Reconcile service's URL as Cloud Run gives it, its deterministic
  # URL https://NAME-PROJECT_NUMBER.REGION.run.app (the Console's env cannot
  # name google_cloud_run_v2_service.service["reconcile"].uri: the same
  # resource, a cycle). An ID token for it is accepted by its IAM check.
  reconcile_url = "https://${var.name_prefix}-reconcile-${data.google_project.this.number}.${var.region}.run.app"

  # Who invokes each service: its entry's invokers, and the runtime
  # account of every service that calls it (local.services[*].calls).
  invokers = {
    for k, s in local.services : k => merge(s.invokers, {
      for caller, c in local.services : "service/${caller}" => google_service_account.runtime[caller].member if contains(c.calls, k)
    })
  }
}

resource "google_cloud_run_v2_service" "service" {
  for_each = local.services

  project              = var.project_id
  name                 = "${var.name_prefix}-${each.key}"
  location             = var.region
  description          = each.value.description
  ingress              = each.value.ingress
  invoker_iam_disabled = each.value.invoker_iam_disabled
  deletion_protection  = var.deletion_protection

  template {
    service_account                  = google_service_account.runtime[each.key].email
    timeout                          = each.value.timeout
    max_instance_request_concurrency = each.value.concurrency

    scaling {
      min_instance_count = 0
      max_instance_count = each.value.max_instances
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = "1"
          memory = each.value.memory
        }
        cpu_idle = each.value.cpu_idle
      }

      env {
        name  = "FUNCTION_TARGET"
        value = each.value.target
      }

      dynamic "env" {
        for_each = each.value.env
        content {
          name  = env.key
          value = env.value
        }
      }

      dynamic "env" {
        for_each = { for k in each.value.secrets : local.secrets[k].env => google_secret_manager_secret.secret[k].secret_id }
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = env.value
              version = "latest"
            }
          }
        }
      }
    }
  }

  lifecycle {
    ignore_changes = [
      template[0].containers[0].image,
      client,
      client_version,
    ]
  }

  # A revision starts only when its account can read what it mounts and
  # reach the ledger and the topics (iam.tf).
  depends_on = [
    google_project_service.apis,
    google_project_iam_member.ledger,
    google_pubsub_topic_iam_member.publisher,
    google_secret_manager_secret_iam_member.accessor,
  ]
}

# Who may invoke each service: ONE authoritative binding of
# roles/run.invoker per service, holding exactly the invokers of its entry
# (none for most). A member added by hand (allUsers on Register or the
# Console) shows as drift in `terraform plan`, and the next apply removes
# it; an _iam_member grant would never see it. An empty binding is kept in
# the state and still corrects a hand-added member
# (GoogleCloudPlatform/magic-modules#1926).
resource "google_cloud_run_v2_service_iam_binding" "invoker" {
  for_each = local.services

  project  = var.project_id
  location = google_cloud_run_v2_service.service[each.key].location
  name     = google_cloud_run_v2_service.service[each.key].name
  role     = "roles/run.invoker"
  members  = sort(values(local.invokers[each.key]))
}
