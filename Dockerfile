# gpu-scheduler as a static binary in a distroless image that runs as a
# non-root user (UID 65532), as deploy/04-deployment.yaml expects.
#
#   docker build -t ghcr.io/gpu-scheduler/gpu-scheduler:0.1.0 .

FROM rust:1.95-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# Static: musl libc, rustls with ring (no OpenSSL). Without the release
# profile's line tables the binary is about 25 MB instead of 110 MB;
# symbols stay, so backtraces still name functions.
ENV CARGO_PROFILE_RELEASE_DEBUG=false
RUN cargo build --release --locked -p gpu-scheduler --target x86_64-unknown-linux-musl \
    && cp target/x86_64-unknown-linux-musl/release/gpu-scheduler /gpu-scheduler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /gpu-scheduler /gpu-scheduler
USER 65532:65532
EXPOSE 10251
ENTRYPOINT ["/gpu-scheduler"]
CMD ["run", "--config=/etc/gpu-scheduler/config.yaml"]
