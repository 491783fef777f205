# kubeindex container image: a static binary on distroless, run as non-root.
#
#   docker build -t kubeindex .
#   docker run --rm -p 8080:8080 kubeindex --demo --listen=:8080
#
# Multi-platform builds cross-compile in the builder's own platform:
#   docker buildx build --platform linux/amd64,linux/arm64 -t kubeindex .

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src

# Modules first, in a layer of their own: it is rebuilt only when go.mod or
# go.sum change, not on every source edit.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .

ARG TARGETOS
ARG TARGETARCH
# CGO off: the binary is static and runs on distroless/static (no libc).
# -trimpath keeps build paths out of the binary; -s -w drops symbol and
# DWARF tables.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/kubeindex ./cmd/kubeindex

# distroless/static: no shell, no package manager; :nonroot ships the
# nonroot user (65532) that deploy/deployment.yaml's securityContext expects.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kubeindex /kubeindex
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/kubeindex"]
# The built-in default listens on 127.0.0.1, unreachable from outside a
# container, and an address others can reach requires authentication. The
# default here is what deploy/ runs: in-cluster, callers authenticated by
# TokenReview and authorized by SubjectAccessReview. Arguments given to
# `docker run` or a pod's args replace this line (e.g. `--demo --listen=:8080
# --allow-unauthenticated-remote` to try it locally).
CMD ["--listen=:8080", "--auth=tokenreview", "--authz=rbac"]
