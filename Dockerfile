# The `shale` binary in a small image, for localstack/docker-compose.yml and deployments.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p shale

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/shale /usr/local/bin/shale
ENTRYPOINT ["shale"]
