# Four Cloud Run services from ONE image (cmd/server, functions-framework):
# FUNCTION_TARGET selects the function served at "/".
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
  }

  webhook_env = merge(local.common_env, var.jwt_audience == "" ? {} : {
    LROSINK_JWT_AUDIENCE = var.jwt_audience
  })
}

resource "google_cloud_run_v2_service" "webhook" {
  project     = var.project_id
  name        = "${var.name_prefix}-webhook"
  location    = var.region
  description = "lrosink Webhook: Gemini completion webhooks (public; deliveries are authenticated by signature)"

  # Gemini calls it from the internet; authentication is the webhook
  # signature (Standard Webhooks HMAC or RS256 JWT), checked on the raw body.
  ingress             = "INGRESS_TRAFFIC_ALL"
  deletion_protection = var.deletion_protection

  template {
    service_account                  = google_service_account.webhook.email
    timeout                          = "60s"
    max_instance_request_concurrency = 80

    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instances.webhook
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        cpu_idle = true
      }

      env {
        name  = "FUNCTION_TARGET"
        value = "Webhook"
      }

      dynamic "env" {
        for_each = local.webhook_env
        content {
          name  = env.key
          value = env.value
        }
      }

      env {
        name = "LROSINK_WEBHOOK_SECRETS"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.webhook.secret_id
            version = "latest"
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

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.datastore_user,
    google_pubsub_topic_iam_member.results_publisher,
    google_secret_manager_secret_iam_member.webhook_secrets,
  ]
}

resource "google_cloud_run_v2_service" "reconcile" {
  project     = var.project_id
  name        = "${var.name_prefix}-reconcile"
  location    = var.region
  description = "lrosink Reconcile: one bounded pass over overdue operations and owed publishes (called by Cloud Scheduler)"

  # Protected by IAM: only the scheduler account may invoke it.
  ingress             = var.private_ingress
  deletion_protection = var.deletion_protection

  template {
    service_account = google_service_account.reconcile.email
    timeout         = var.reconcile_attempt_deadline
    # One pass per instance at a time; passes are bounded and fenced, so an
    # overlap (a slow pass meeting the next tick) is safe, just wasteful.
    max_instance_request_concurrency = 1

    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instances.reconcile
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        cpu_idle = true
      }

      env {
        name  = "FUNCTION_TARGET"
        value = "Reconcile"
      }

      dynamic "env" {
        for_each = local.common_env
        content {
          name  = env.key
          value = env.value
        }
      }

      env {
        name = "GEMINI_API_KEY"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.gemini_api_key.secret_id
            version = "latest"
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

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.datastore_user,
    google_pubsub_topic_iam_member.results_publisher,
    google_secret_manager_secret_iam_member.gemini_api_key,
  ]
}

resource "google_cloud_run_v2_service" "register" {
  project     = var.project_id
  name        = "${var.name_prefix}-register"
  location    = var.region
  description = "lrosink Register: submitters record operations as PENDING (IAM-protected)"

  # Protected by IAM: only var.register_invokers may invoke it.
  ingress             = var.private_ingress
  deletion_protection = var.deletion_protection

  template {
    service_account                  = google_service_account.register.email
    timeout                          = "30s"
    max_instance_request_concurrency = 80

    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instances.register
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        cpu_idle = true
      }

      env {
        name  = "FUNCTION_TARGET"
        value = "Register"
      }

      dynamic "env" {
        for_each = local.common_env
        content {
          name  = env.key
          value = env.value
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

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.datastore_user,
  ]
}

resource "google_cloud_run_v2_service" "console" {
  project     = var.project_id
  name        = "${var.name_prefix}-console"
  location    = var.region
  description = "lrosink Console: the read-only operations console at /ui/ (IAM-protected; reach it with gcloud run services proxy)"

  # Protected by IAM: only var.console_invokers may invoke it (operators,
  # through `gcloud run services proxy`, which adds their identity token).
  ingress             = var.private_ingress
  deletion_protection = var.deletion_protection

  template {
    service_account                  = google_service_account.console.email
    timeout                          = "30s"
    max_instance_request_concurrency = 20

    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instances.console
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = "1"
          memory = "256Mi"
        }
        cpu_idle = true
      }

      env {
        name  = "FUNCTION_TARGET"
        value = "Console"
      }

      dynamic "env" {
        for_each = local.common_env
        content {
          name  = env.key
          value = env.value
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

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.console_datastore_viewer,
  ]
}

# The Webhook is the ONLY public service: Gemini cannot present Google
# credentials, so allUsers may invoke it and the handler authenticates every
# delivery by its signature before touching the ledger.
resource "google_cloud_run_v2_service_iam_member" "webhook_public" {
  project  = var.project_id
  location = google_cloud_run_v2_service.webhook.location
  name     = google_cloud_run_v2_service.webhook.name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# Reconcile: invoked by the Cloud Scheduler account only.
resource "google_cloud_run_v2_service_iam_member" "reconcile_scheduler" {
  project  = var.project_id
  location = google_cloud_run_v2_service.reconcile.location
  name     = google_cloud_run_v2_service.reconcile.name
  role     = "roles/run.invoker"
  member   = google_service_account.scheduler.member
}

# Register: invoked by the job submitters listed in var.register_invokers.
resource "google_cloud_run_v2_service_iam_member" "register_invokers" {
  for_each = toset(var.register_invokers)

  project  = var.project_id
  location = google_cloud_run_v2_service.register.location
  name     = google_cloud_run_v2_service.register.name
  role     = "roles/run.invoker"
  member   = each.value
}

# Console: invoked by the operators listed in var.console_invokers.
resource "google_cloud_run_v2_service_iam_member" "console_invokers" {
  for_each = toset(var.console_invokers)

  project  = var.project_id
  location = google_cloud_run_v2_service.console.location
  name     = google_cloud_run_v2_service.console.name
  role     = "roles/run.invoker"
  member   = each.value
}
