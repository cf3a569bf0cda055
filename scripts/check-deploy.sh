#!/usr/bin/env bash
# Offline checks of the deployment files, no cloud access needed:
#   1. terraform fmt -check on terraform/
#   2. terraform validate without the provider: the module loads (no
#      duplicate definitions); only the missing provider is reported
#   2b. the provider schema: deploy_test checks every attribute and block
#      against the google provider's real schema, read in place from
#      ../shared/reference (or $LROSINK_PROVIDER_SCHEMA); where that file is
#      absent, terraform validate with the provider instead, if the provider
#      can be installed (one line says which ran)
#   3. tflint (scripts/tflint.sh; `make test` sets LROSINK_TFLINT_LATER=1
#      and runs it after the tests, so its first build overlaps them)
#   4. the container binary, built exactly as the Dockerfile builds it
#      (scripts/build-flags.sh is the one definition of the build flags)
#   5. the suite's version test on a copy of the source without .git (what
#      `gcloud builds submit` uploads: .gcloudignore drops .git), so `make
#      test` in Cloud Build cannot fail on a missing repository
# The deployment rules test (deploy_test/: service accounts, public services,
# secrets, Firestore indexes vs queries, Scheduler -> Reconcile) runs with the
# other Go tests in `make test`.
#
#   scripts/check-deploy.sh
#
# terraform init and a full validate run only without the schema file
# (step 2b): with it, the Go test is the same check offline.
set -euo pipefail

cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }
die() { echo "check-deploy: $*" >&2; exit 1; }

step "terraform fmt -check"
# shellcheck source=scripts/prereqs-lib.sh
. scripts/prereqs-lib.sh
command -v terraform >/dev/null 2>&1 || die "terraform not found: $(prereq_hint terraform)"
terraform fmt -check -recursive -diff terraform
echo "terraform fmt: ok"

step "terraform validate, without the provider"
# Without the google provider (which this check must not download)
# validate still loads the module, and refuses what Terraform itself
# refuses whatever the provider: duplicate locals, variables, outputs or
# resources, malformed blocks. The one error it must report is the missing
# provider; any other is a module terraform apply would refuse (a local
# defined in two files once stopped every step of DEPLOY.md).
tfv=$(mktemp -d)
cp terraform/*.tf "$tfv"/
(cd "$tfv" && terraform validate -json -no-color) > "$tfv/validate.json" || true
# One "summary" line per diagnostic in validate's JSON (no jq needed).
summaries=$(grep -o '"summary": *"[^"]*"' "$tfv/validate.json" | sed 's/^"summary": *//' || true)
other=$(printf '%s\n' "$summaries" | grep -v '^"Missing required provider"$' | grep -v '^$' || true)
if [ -n "$other" ]; then
  cat "$tfv/validate.json" >&2
  rm -rf "$tfv"
  die "terraform validate refuses the module: $other"
fi
rm -rf "$tfv"
printf '%s\n' "$summaries" | grep -q '^"Missing required provider"$' ||
  die "terraform validate reported no missing provider: the check did not load the module as expected"
echo "terraform validate (module loads; provider not installed): ok"

step "provider schema, or terraform validate with the provider"
# The same path deploy_test's schema check reads (relative to the
# repository root here, to deploy_test there).
schema=${LROSINK_PROVIDER_SCHEMA:-../shared/reference/google-provider-7.45.0-schema.json.gz}
if [ -r "$schema" ]; then
  echo "provider schema $schema: deploy_test (TestHCLMatchesTheProviderSchema) checks every resource against it"
else
  tfp=$(mktemp -d)
  cp terraform/*.tf "$tfp"/
  if (cd "$tfp" && terraform init -backend=false -input=false -no-color) >"$tfp/init.log" 2>&1; then
    (cd "$tfp" && terraform validate -no-color) || { rm -rf "$tfp"; die "terraform validate refuses the configuration"; }
    echo "no provider schema at $schema: terraform validate with the google provider installed: ok"
  else
    echo "no provider schema at $schema, and the google provider cannot be installed here ($(grep -m1 -iE 'error|could not|failed' "$tfp/init.log" | tr -s ' ' | cut -c1-120)): neither the schema check nor a full terraform validate ran"
  fi
  rm -rf "$tfp"
fi

if [ "${LROSINK_TFLINT_LATER:-0}" != 1 ]; then
  step "tflint"
  scripts/tflint.sh
fi

step "container binary (scripts/build-flags.sh, as in the Dockerfile)"
# shellcheck source=scripts/build-flags.sh
source scripts/build-flags.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The longest step here on a fresh machine (about 80 s: every dependency
# compiled once for linux/amd64 static): said before it starts.
echo "building ./cmd/server as the Dockerfile does (CGO_ENABLED=0, -trimpath; about a minute on a fresh machine)..."
lrosink_build_server "$tmp/server"
# The distroless/static base has no libc: the binary must be static.
go version -m "$tmp/server" | grep -q 'CGO_ENABLED=0' || die "cmd/server was not built with CGO_ENABLED=0"
echo "built ./cmd/server: $(du -h "$tmp/server" | cut -f1), static (CGO_ENABLED=0), -trimpath, stripped"

step "version test on a source tree without .git (git archive)"
# Only from a git checkout; the copy itself (or a Cloud Build upload) has
# nothing to archive. The archive holds the committed tree plus tracked
# changes (git stash create), extracted outside any repository.
if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  archive=$(mktemp -d)
  trap 'rm -rf "$tmp" "$archive"' EXIT
  rev=$(git stash create)
  git archive "${rev:-HEAD}" | tar -x -C "$archive"
  [ ! -e "$archive/.git" ] || die "the archive copy has a .git"
  (cd "$archive" && ! git rev-parse --is-inside-work-tree >/dev/null 2>&1) ||
    die "$archive is inside a git repository: the copy would not be without .git"
  echo "building and running the version test in a git archive copy at $archive..."
  (cd "$archive" && go test -count=1 -run 'TestBinary/VersionNamesTheRevision' ./cmd/lrosink/) ||
    die "the version test fails on a source tree without .git (what Cloud Build uploads)"
  echo "version test on a git archive copy: ok"
else
  echo "not a git checkout: skipped (this tree is already without .git)"
fi

printf '\ncheck-deploy: all checks passed\n'
