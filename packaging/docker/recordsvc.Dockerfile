# syntax=docker/dockerfile:1
# recordsvc as a container image: static binary (CGO_ENABLED=0), distroless base, non-root.
# From the repository root:
#   docker build -f packaging/docker/recordsvc.Dockerfile \
#     --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t tributary/recordsvc .
#   docker run -v $PWD/recordsvc.yaml:/etc/tributary/recordsvc.yaml:ro -p 8080:8080 -p 9090:9090 tributary/recordsvc
# The configuration must listen on 0.0.0.0 inside a container (listen: {grpc: 0.0.0.0:8080,
# metrics: 0.0.0.0:9090}); see examples/recordsvc/CONFIG.md. recordsvc keeps no local state.
# internal/buildinfo's TestPackaging runs this file's build command and checks its shape.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY examples/go.mod examples/go.sum ./examples/
RUN GOWORK=off go -C examples mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=
RUN CGO_ENABLED=0 GOWORK=off go -C examples build -trimpath -ldflags "-s -w -X github.com/tributary-dev/tributary/internal/buildinfo.Version=${VERSION} -X github.com/tributary-dev/tributary/internal/buildinfo.Commit=${COMMIT}" -o /out/recordsvc ./recordsvc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/recordsvc /usr/local/bin/recordsvc
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/recordsvc"]
CMD ["--config", "/etc/tributary/recordsvc.yaml"]
