# syntax=docker/dockerfile:1
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version the daemon reports: --build-arg VERSION=v1.2.3, else the commit
# of the checkout built (go build stamps it from .git, copied with the rest).
ARG VERSION=
RUN CGO_ENABLED=1 go build -trimpath -buildvcs=auto -ldflags="-s -w -X main.ldVersion=${VERSION}" -o /out/tether ./cmd/tether

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 tether \
 && mkdir /data && chown tether:tether /data
COPY --from=build /out/tether /usr/local/bin/tether
USER tether
ENV TETHER_DATA=/data TETHER_LISTEN=0.0.0.0:7420
VOLUME /data
EXPOSE 7420
ENTRYPOINT ["tether"]
CMD ["serve"]
