# syntax=docker/dockerfile:1
# The one lrosink image: cmd/server (FUNCTION_TARGET routing, graceful SIGTERM). Every Cloud Run
# service of terraform/run.tf (local.services) runs it; FUNCTION_TARGET
# (Webhook, Reconcile, Register, Console) selects the function served at "/".
#
#   docker build -t lrosink .
#   docker run --rm -p 8080:8080 -e FUNCTION_TARGET=Webhook -e ... lrosink

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build flags live in scripts/build-flags.sh only (scripts/check-deploy.sh
# builds with the same file).
RUN bash scripts/build-flags.sh /out/server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/server /server
USER nonroot:nonroot
# Cloud Run sets PORT itself (8080 by default); this default is for docker run.
ENV PORT=8080
EXPOSE 8080
ENTRYPOINT ["/server"]
