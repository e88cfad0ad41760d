# syntax=docker/dockerfile:1
# cdcmirror as a container image: static binary (CGO_ENABLED=0), distroless base, non-root.
# From the repository root:
#   docker build -f packaging/docker/cdcmirror.Dockerfile \
#     --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t tributary/cdcmirror .
#   docker run -v $PWD/cdcmirror.yaml:/etc/tributary/cdcmirror.yaml:ro -v cdcmirror-state:/var/lib/tributary \
#     -e TRIBUTARY_PG_DSN=... -p 9464:9464 tributary/cdcmirror
# The state file (bbolt) and the DLQ go to /var/lib/tributary (the working directory: relative
# paths in the configuration land there); keep it on a volume, one per pipeline deployment.
# internal/buildinfo's TestPackaging runs this file's build command and checks its shape.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY examples/go.mod examples/go.sum ./examples/
RUN GOWORK=off go -C examples mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=
RUN CGO_ENABLED=0 GOWORK=off go -C examples build -trimpath -ldflags "-s -w -X github.com/tributary-dev/tributary/internal/buildinfo.Version=${VERSION} -X github.com/tributary-dev/tributary/internal/buildinfo.Commit=${COMMIT}" -o /out/cdcmirror ./cdcmirror
RUN mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cdcmirror /usr/local/bin/cdcmirror
COPY --from=build --chown=65532:65532 /out/state /var/lib/tributary
USER 65532:65532
WORKDIR /var/lib/tributary
VOLUME ["/var/lib/tributary"]
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/cdcmirror"]
CMD ["run", "--config", "/etc/tributary/cdcmirror.yaml", "--metrics-addr", "0.0.0.0:9464", "--progress", "never"]
