# Sourced by scripts/preflight.sh, scripts/with-emulators.sh,
# scripts/check-deploy.sh and scripts/ensure-chromium.sh: what `make test`
# needs and the one command that installs each, said once, so that the
# preflight's first-seconds verdict and each step's own refusal agree.
#
#   prereq_hint NAME          the install command of NAME (go, terraform,
#                             emulators, java, curl, flock, chromium)
#   emulator_bins             sets sdk_root, firestore_bin and pubsub_bin
#                             from the gcloud on PATH (empty without one)
#   chromium_state            found, installable (root with apt-get: make
#                             test's scripts/ensure-chromium.sh installs
#                             Debian's package) or missing
#
# LROSINK_APT_GET (default /usr/bin/apt-get) is the apt-get a chromium
# install would use; tests point it elsewhere.

prereq_hint() {
  case "$1" in
  go) echo "install Go ${2:-1.26} or newer from https://go.dev/dl/ (go.mod's go line), or let GOTOOLCHAIN=auto fetch it" ;;
  terraform) echo "install Terraform >= 1.5 from https://developer.hashicorp.com/terraform/install (or apt-get install terraform from https://apt.releases.hashicorp.com)" ;;
  emulators | java) echo "install them with: apt-get install google-cloud-cli-firestore-emulator google-cloud-cli-pubsub-emulator openjdk-17-jre-headless (or: gcloud components install cloud-firestore-emulator pubsub-emulator)" ;;
  curl) echo "apt-get install curl" ;;
  flock) echo "apt-get install util-linux" ;;
  chromium) echo "apt-get install chromium" ;;
  *) echo "see the README's Test section" ;;
  esac
}

emulator_bins() {
  sdk_root= firestore_bin= pubsub_bin=
  local gcloud
  gcloud=$(command -v gcloud) || return 0
  sdk_root=$(dirname "$(dirname "$(readlink -f "$gcloud")")")
  pubsub_bin="$sdk_root/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
  firestore_bin="$sdk_root/platform/cloud-firestore-emulator/cloud_firestore_emulator"
}

chromium_state() {
  if command -v chromium >/dev/null 2>&1; then
    echo found
  elif [ "$(id -u)" = 0 ] && [ -x "${LROSINK_APT_GET:-/usr/bin/apt-get}" ]; then
    echo installable
  else
    echo missing
  fi
}
