# syntax=docker/dockerfile:1
# everynode: a static binary on distroless, running as nonroot.
# Build: docker build --build-arg VERSION=$(git describe --always) -t everynode .

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/everynode ./cmd/everynode

# static: no libc needed (CGO off); nonroot: uid 65532, matching the chart's
# runAsNonRoot and readOnlyRootFilesystem.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/everynode /everynode
USER 65532:65532
ENTRYPOINT ["/everynode"]
CMD ["serve"]
