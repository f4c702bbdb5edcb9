#!/usr/bin/env bash
# TLS in front of the team's Prefect server (docs/deployment.md, section 2): Debian's nginx as a
# reverse proxy, https://PUBLIC_NAME:TLS_PORT -> http://127.0.0.1:PORT (API, websockets, UI), in
# the foreground (a systemd unit or tmux keeps it running, as the server).
#   TLS_PORT=4443 PUBLIC_NAME=cpu-host bash scripts/tls-proxy.sh
# The certificate: TLS_CERT and TLS_KEY (PEM), else a self-signed one for PUBLIC_NAME, made once in
# $PREFECT_HOME/tls/ (its key readable by its owner only); clients trust it with
# PREFECT_API_SSL_CERT_FILE=$PREFECT_HOME/tls/cert.pem.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-4200}"
TLS_PORT="${TLS_PORT:-4443}"
LISTEN="${LISTEN:-0.0.0.0}"
PUBLIC_NAME="${PUBLIC_NAME:-$(hostname)}"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
if ! command -v nginx >/dev/null; then
    echo "tls proxy: installing Debian's nginx-light" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null
fi
dir="$PREFECT_HOME/tls"
mkdir -p "$dir"
chmod 711 "$dir"  # nginx's workers pass through to its temporary files; the key stays the owner's
cert="${TLS_CERT:-$dir/cert.pem}"
key="${TLS_KEY:-$dir/key.pem}"
if [ -z "${TLS_CERT:-}" ] && [ ! -s "$cert" ]; then
    (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=$PUBLIC_NAME" \
        -addext "subjectAltName=DNS:$PUBLIC_NAME,DNS:localhost,IP:127.0.0.1" \
        -keyout "$key" -out "$cert" 2>/dev/null)
    chmod 644 "$cert"
    echo "tls proxy: made a self-signed certificate for $PUBLIC_NAME in $cert" >&2
fi
tmp="$dir/tmp-$TLS_PORT"
mkdir -p "$tmp"
sed -e "s|@LISTEN@|$LISTEN|g; s|@TLS_PORT@|$TLS_PORT|g; s|@PORT@|$PORT|g; s|@CERT@|$cert|g; s|@KEY@|$key|g" \
    -e "s|@DIR@|$tmp|g; s|@TMP@|$tmp|g" scripts/tls-proxy.conf > "$tmp/nginx.conf"
echo "tls proxy: https://$PUBLIC_NAME:$TLS_PORT -> http://127.0.0.1:$PORT (clients: PREFECT_API_URL=https://$PUBLIC_NAME:$TLS_PORT/api PREFECT_API_SSL_CERT_FILE=$cert)" >&2
exec nginx -c "$tmp/nginx.conf" -g "daemon off;"
