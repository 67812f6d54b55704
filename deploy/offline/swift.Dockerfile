# A stand-in for the official swift:6.3-bookworm build image, for machines that cannot pull
# from Docker Hub (scripts/compose-check.sh builds it only then): Debian 12, the official image's
# build dependencies, and the Swift toolchain of the machine running the check (copied into the
# build context as `toolchain/`, its `usr` tree). Package mirrors the machine's git redirects
# GitHub to (`url.<dir>.insteadOf`) come along in `extra/` with the same redirects in
# `extra/etc/gitconfig`, so `swift package resolve` works without GitHub too.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        binutils git gnupg2 libc6-dev libcurl4-openssl-dev libedit2 libgcc-12-dev libncurses6 \
        libpython3-dev libsqlite3-0 libstdc++-12-dev libxml2-dev libz3-dev pkg-config tzdata \
        zlib1g-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY toolchain/ /usr/
RUN swift --version
# The mirrors at their own paths and /etc/gitconfig with the redirects, in one layer.
COPY extra/ /
RUN git config --system --list
