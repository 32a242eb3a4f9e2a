#!/usr/bin/env bash
# Build docker/Dockerfile.cpu as tiankong:cpu and check the image for real (README, "Docker").
#
#   bash scripts/docker_test.sh
#
# 1. A Docker daemon: the running one, or dockerd started here (docker.io and iptables installed
#    with apt first if missing; root only) and stopped again at the end.
# 2. The base: python:3.11.14-slim-bookworm when a registry serves it; otherwise a local stand-in
#    (mmdebstrap, Debian bookworm from the mirror apt already uses, with Python 3.11 and this
#    machine's CA certificates), made once and cached by its recipe in the cache folder.
# 3. torch's CPU wheel for the builder stage: from TORCH_INDEX_URL when it answers; otherwise
#    the wheel this machine's pip finds (its configured find-links/indexes) is served to the
#    build from 127.0.0.1 as a one-package index (the build then runs with --network host).
# 4. docker build, then the image's size, per layer too (docker history).
# 5. docker run --read-only --tmpfs /tmp: /ready within 15 s, POST /predict fills the poem with
#    鸟, a TIANKONG_* setting is honoured, the page loads, the HEALTHCHECK turns healthy, the
#    process is not root, SIGTERM stops it with exit code 0 within the drain timeout, and
#    `docker logs` has no traceback; then `tiankong predict` under a random uid in group 0
#    (OpenShift's way) fills the poem from the baked cache.
# 6. docker/compose.yaml with Debian's docker-compose, when it runs here: up, /ready, /predict.
#
# Network: the package registries only (PyPI, the Debian mirror, TORCH_INDEX_URL); the
# containers are checked on 127.0.0.1. Leaves no container, network or volume behind (a trap
# removes them, and stops the dockerd it started). Prints the time of each step. Any failure is
# one line starting with "docker_test: FAIL" and exit code 1; nothing is skipped silently.
#
# Environment: DOCKER_TEST_CACHE, the cache folder (default /var/cache/tiankong-docker, or
# $XDG_CACHE_HOME/tiankong-docker when that can't be written); BASE_IMAGE (use this base, no
# probing); TORCH_INDEX_URL; TORCH_INDEX_PORT (28124; the next of 8 ports when it is taken); DOCKER_TEST_IMAGE (tiankong:cpu).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${DOCKER_TEST_IMAGE:-tiankong:cpu}"
REAL_BASE="python:3.11.14-slim-bookworm"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
POEM="春眠不觉晓，处处闻啼[MASK]。"
DRAIN_S=5  # TIANKONG_DRAIN_TIMEOUT for the run check: SIGTERM must stop it within this
READY_S=15
CACHE="${DOCKER_TEST_CACHE:-/var/cache/tiankong-docker}"
if ! mkdir -p "$CACHE" 2>/dev/null || [[ ! -w "$CACHE" ]]; then
    CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tiankong-docker"
    mkdir -p "$CACHE"
fi
WORK="$(mktemp -d)"
RUN_ID="tk-test-$$"
STARTED_DOCKERD=""
INDEX_SERVER=""
COMPOSE_UP=""
T0=$SECONDS
STEP_T=$SECONDS
STEP_NAME=""

say() { echo "docker_test: $*"; }
fail() {
    echo "docker_test: FAIL: $*" >&2
    exit 1
}
step() {  # closes the step before (with its time) and opens the next
    if [[ -n "$STEP_NAME" ]]; then say "  ... $STEP_NAME took $((SECONDS - STEP_T)) s"; fi
    STEP_NAME="$1"
    STEP_T=$SECONDS
    say "[$(date -u +%H:%M:%S)] $1"
}

cleanup() {
    local status=$?
    set +e
    if [[ -n "$COMPOSE_UP" ]]; then
        TIANKONG_PORT=0 docker-compose -p "$RUN_ID" -f docker/compose.yaml down -v \
            >/dev/null 2>&1
    fi
    docker ps -aq --filter "label=tiankong-test=$RUN_ID" 2>/dev/null | xargs -r docker rm -f -v >/dev/null
    if [[ -n "$INDEX_SERVER" ]]; then kill "$INDEX_SERVER" 2>/dev/null; fi
    if [[ -n "$STARTED_DOCKERD" ]]; then
        say "stopping the dockerd started here (pid $STARTED_DOCKERD)"
        kill -TERM "$STARTED_DOCKERD" 2>/dev/null
        for _ in $(seq 60); do kill -0 "$STARTED_DOCKERD" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. the daemon -----------------------------------------------------------------------
step "1. Docker daemon"
for tool in curl python3 sha256sum; do
    command -v "$tool" >/dev/null || fail "$tool is missing (the checks need it)."
done
if docker info >/dev/null 2>&1; then
    say "using the running daemon (server $(docker version --format '{{.Server.Version}}'))"
else
    if ! command -v dockerd >/dev/null; then
        [[ $(id -u) == 0 ]] || fail "no Docker daemon runs and dockerd is not installed (as root, this script installs docker.io)."
        say "installing docker.io and iptables with apt"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io iptables </dev/null \
            >"$WORK/apt.log" 2>&1 || fail "apt-get install docker.io iptables failed: $(tail -1 "$WORK/apt.log")"
    fi
    [[ $(id -u) == 0 ]] || fail "no Docker daemon runs, and only root can start dockerd here."
    command -v docker >/dev/null || fail "dockerd is installed but the docker client is not."
    dockerd >"$WORK/dockerd.log" 2>&1 </dev/null &
    STARTED_DOCKERD=$!
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$STARTED_DOCKERD" 2>/dev/null || break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 \
        || fail "the Docker daemon did not start: $(grep -iE 'error|fail' "$WORK/dockerd.log" | tail -1)"
    say "started dockerd (pid $STARTED_DOCKERD, server $(docker version --format '{{.Server.Version}}')); it is stopped at the end"
fi

# --- 2. the base image --------------------------------------------------------------------
step "2. base image"
debian_mirror() {  # the first Debian mirror for bookworm that apt uses (deb822 or one-line)
    python3 - /etc/apt/sources.list /etc/apt/sources.list.d/* <<'EOF'
import re, sys
for name in sys.argv[1:]:
    try:
        text = open(name, encoding="utf-8").read()
    except OSError:
        continue
    for stanza in re.split(r"\n\s*\n", text):
        uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
        suites = re.search(r"^Suites:(.*)$", stanza, re.M)
        if uris and suites and "bookworm" in suites.group(1).split():
            print(uris.group(1)); sys.exit()
    for line in text.splitlines():  # deb [options] URL suite components
        words = re.sub(r"\[[^]]*\]", " ", line).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == "bookworm":
            print(words[1]); sys.exit()
sys.exit("no Debian bookworm mirror in /etc/apt/sources.list*")
EOF
}
if [[ -n "${BASE_IMAGE:-}" ]]; then
    say "base: $BASE_IMAGE (given by BASE_IMAGE)"
elif docker image inspect "$REAL_BASE" >/dev/null 2>&1 || timeout 120 docker pull -q "$REAL_BASE" >"$WORK/pull.log" 2>&1; then
    BASE_IMAGE="$REAL_BASE"
    say "base: $REAL_BASE (the real one, from a registry)"
else
    say "no registry serves $REAL_BASE ($(tail -1 "$WORK/pull.log" | cut -c1-120))"
    mirror="$(debian_mirror)" || fail "no Debian mirror to make the stand-in base from."
    certs=/etc/ssl/certs/ca-certificates.crt
    [[ -f $certs ]] || fail "$certs is missing: the stand-in base needs this machine's CA certificates."
    packages="ca-certificates,python3,python3-venv,python-is-python3,passwd"
    recipe="mmdebstrap $(mmdebstrap --version 2>/dev/null | cut -d' ' -f2) minbase bookworm $mirror $packages nodocs certs $(sha256sum <"$certs" | cut -c1-64) v1"
    key="$(echo "$recipe" | sha256sum | cut -c1-12)"
    BASE_IMAGE="tiankong-base:bookworm-$key"
    tarball="$CACHE/base-bookworm-$key.tar"
    if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        say "base: $BASE_IMAGE, the local stand-in, reused (recipe: ${recipe:0:140}...)"
    else
        if [[ ! -f $tarball ]]; then
            if ! command -v mmdebstrap >/dev/null; then
                [[ $(id -u) == 0 ]] || fail "mmdebstrap is missing (apt-get install mmdebstrap)."
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap </dev/null \
                    >"$WORK/apt.log" 2>&1 || fail "apt-get install mmdebstrap failed: $(tail -1 "$WORK/apt.log")"
            fi
            say "making the stand-in base with mmdebstrap from $mirror"
            # no docs, man pages or locales (as python:slim), the machine's CA bundle copied in
            # so pip inside a build verifies the package index through this network; "$1" is
            # the hook's root file system, for mmdebstrap to expand
            # shellcheck disable=SC2016
            mmdebstrap --variant=minbase --format=tar --include="$packages" \
                --dpkgopt='path-exclude=/usr/share/doc/*' \
                --dpkgopt='path-include=/usr/share/doc/*/copyright' \
                --dpkgopt='path-exclude=/usr/share/man/*' \
                --dpkgopt='path-exclude=/usr/share/locale/*' \
                --dpkgopt='path-exclude=/usr/share/info/*' \
                --customize-hook="copy-in $certs /etc/ssl/certs" \
                --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
                bookworm "$tarball.part" "$mirror" </dev/null >"$WORK/mmdebstrap.log" 2>&1 \
                || fail "mmdebstrap failed: $(tail -1 "$WORK/mmdebstrap.log")"
            mv "$tarball.part" "$tarball"
        else
            say "the stand-in's root file system is cached: $tarball"
        fi
        docker import \
            --change 'ENV LANG=C.UTF-8' \
            --change "ENV PIP_CERT=$certs" \
            --change 'CMD ["python3"]' \
            "$tarball" "$BASE_IMAGE" >/dev/null || fail "docker import of $tarball failed."
        say "base: $BASE_IMAGE, the local stand-in, made (recipe: ${recipe:0:140}...)"
    fi
    say "  the stand-in base is $(($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE") / 1000000)) MB"
fi

# --- 3. torch's CPU wheel for the builder ------------------------------------------------
step "3. torch CPU wheel"
torch_version="$(sed -n 's/^torch==//p' requirements-lock.txt)"
[[ -n $torch_version ]] || fail "requirements-lock.txt pins no torch."
build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
if curl -fsS -m 20 -o /dev/null "$TORCH_INDEX_URL/torch/" 2>/dev/null; then
    say "torch==$torch_version from $TORCH_INDEX_URL"
    build_args+=(--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL")
else
    say "$TORCH_INDEX_URL does not answer; taking torch==$torch_version from this machine's pip"
    wheels="$CACHE/torch-index/simple/torch"
    mkdir -p "$wheels"
    if ! ls "$wheels"/torch-"${torch_version}"-cp311-*.whl >/dev/null 2>&1; then
        python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
            --platform manylinux_2_28_x86_64 --dest "$wheels" "torch==$torch_version" \
            >"$WORK/pip.log" 2>&1 || fail "no torch==$torch_version wheel: $(tail -1 "$WORK/pip.log")"
    fi
    say "  $(basename "$(ls "$wheels"/torch-*.whl)") ($(du -m "$wheels" | cut -f1) MB, cached in $wheels)"
    # A fixed port: the URL is a build argument, and a new value would miss docker's build cache.
    # It lies below the kernel's ephemeral range (32768-60999 on Linux), where an outgoing
    # connection's source port can hold any port for a while (CI once found 38124 taken). When
    # it is taken anyway, the next of a few fixed ports is used, and the build says so.
    first_port="${TORCH_INDEX_PORT:-28124}"
    port=""
    for try in $(seq "$first_port" $((first_port + 7))); do
        python3 -m http.server --bind 127.0.0.1 --directory "$CACHE/torch-index" "$try" \
            >"$WORK/index.log" 2>&1 &
        INDEX_SERVER=$!
        for _ in $(seq 40); do
            curl -fsS -o /dev/null "http://127.0.0.1:$try/simple/torch/" 2>/dev/null && { port=$try; break; }
            kill -0 "$INDEX_SERVER" 2>/dev/null || break
            sleep 0.25
        done
        [[ -n $port ]] && break
        kill "$INDEX_SERVER" 2>/dev/null || true
        wait "$INDEX_SERVER" 2>/dev/null || true
        INDEX_SERVER=""
        say "  127.0.0.1:$try could not serve the torch index ($(tail -1 "$WORK/index.log")); trying the next port"
    done
    [[ -n $port ]] || fail "the local torch index did not start on 127.0.0.1:$first_port to $((first_port + 7)): $(tail -1 "$WORK/index.log")"
    [[ $port == "$first_port" ]] || say "  the torch index is on port $port, not $first_port: docker's cache of the torch layer is missed once"
    build_args+=(--network host --build-arg "TORCH_INDEX_URL=http://127.0.0.1:$port/simple")
fi

# --- 4. the build -------------------------------------------------------------------------
step "4. docker build -f docker/Dockerfile.cpu -t $IMAGE"
build_start=$SECONDS
previous="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
# the builder stage first, tagged: the builder a code change replaces is then untagged, and
# pruned below by its label (each run left a 2.2 GB one behind); the full build reuses it
say "  docker build --force-rm ${build_args[*]} --target builder -f docker/Dockerfile.cpu -t $IMAGE-builder ."
if ! docker build --force-rm "${build_args[@]}" --target builder -f docker/Dockerfile.cpu \
    -t "$IMAGE-builder" . 2>&1 | while IFS= read -r line; do echo "$SECONDS $line"; done >"$WORK/build-builder.log"; then
    tail -30 "$WORK/build-builder.log" >&2
    fail "docker build --target builder failed (the build log's last lines are above)."
fi
say "  docker build --force-rm ${build_args[*]} -f docker/Dockerfile.cpu -t $IMAGE ."
# each line of the build's output stamped with the script's clock, for the steps' times below
if ! docker build --force-rm "${build_args[@]}" -f docker/Dockerfile.cpu -t "$IMAGE" . 2>&1 \
    | while IFS= read -r line; do echo "$SECONDS $line"; done >"$WORK/build.log"; then
    tail -30 "$WORK/build.log" >&2
    fail "docker build failed (the build log's last lines are above)."
fi
BUILD_S=$((SECONDS - build_start))
if [[ -n "$INDEX_SERVER" ]]; then kill "$INDEX_SERVER"; INDEX_SERVER=""; fi
SIZE_MB=$(($(docker image inspect -f '{{.Size}}' "$IMAGE") / 1000000))
if [[ -n $previous && $previous != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
    # the image this build replaced, so reruns don't pile up old images (the builder stage's
    # layers stay, tagged $IMAGE-builder: they are docker's build cache)
    docker rmi "$previous" >/dev/null 2>&1 || say "  (the replaced image $previous is still in use)"
fi
pruned="$(docker image prune -f --filter label=tiankong.stage=builder | tail -1)"
say "  builder stage tagged $IMAGE-builder (docker's build cache); older builders pruned: ${pruned#Total reclaimed space: }"
say "built $IMAGE in $BUILD_S s on $BASE_IMAGE: $SIZE_MB MB"
say "  the build's steps that took 2 s or more (those docker's layer cache kept say so):"
awk -v end="$SECONDS" '
    function flush() { if (name != "" && (end_of - start) >= 2) printf "docker_test:    %5d s  %s%s\n", end_of - start, substr(name, 1, 90), cached }
    / Step [0-9]+\/[0-9]+ : / { end_of = $1; flush(); start = $1; name = substr($0, index($0, "Step ")); cached = ""; next }
    / ---> Using cache/ { cached = " (cached)" }
    END { end_of = end; flush() }' "$WORK/build.log"
say "  layers (docker history):"
docker history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" \
    | sed -e 's|/bin/sh -c #(nop) *||' -e 's|/bin/sh -c |RUN |' \
    | awk -F'\t' '$1 != "0B" {printf "docker_test:    %9s  %s\n", $1, substr($2 == "" ? "(the base)" : $2, 1, 100)}'

# --- 5. the container ---------------------------------------------------------------------
http_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {  # $1 = base URL, $2 = seconds; prints the seconds it took
    local start=$SECONDS deadline=$((SECONDS + $2))
    until curl -fsS -m 2 -o /dev/null "$1/ready" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
    echo $((SECONDS - start))
}
check_poem() {  # $1 = base URL
    curl -fsS -m 10 -H 'Content-Type: application/json' \
        -d "{\"text\": \"$POEM\"}" "$1/predict" >"$WORK/predict.json" \
        || fail "POST /predict failed: $(cat "$WORK/predict.json" 2>/dev/null)"
    python3 - "$WORK/predict.json" <<'EOF' || fail "POST /predict: $(head -c 300 "$WORK/predict.json")"
import json, sys
body = json.load(open(sys.argv[1], encoding="utf-8"))
found = body["predictions"]
top = found[0]
print(f"docker_test:   POST /predict: {body['sequence']} ({top['token']} {top['score']:.3f}, {len(found)} candidates)")
sys.exit(top["token"] != "鸟" or len(found) != 5)
EOF
}

step "5. docker run --read-only --tmpfs /tmp $IMAGE"
port="$(http_port)"
run_start=$SECONDS
docker run -d --name "$RUN_ID" --label "tiankong-test=$RUN_ID" --read-only --tmpfs /tmp \
    -p "127.0.0.1:$port:8000" -e "TIANKONG_DRAIN_TIMEOUT=$DRAIN_S" -e TIANKONG_MAX_BATCH_TEXTS=7 \
    -e HF_HUB_OFFLINE=1 --health-interval 2s --health-start-period 60s "$IMAGE" >/dev/null \
    || fail "docker run failed."
url="http://127.0.0.1:$port"
took="$(wait_ready "$url" "$READY_S")" \
    || { docker logs "$RUN_ID" 2>&1 | tail -20 >&2; fail "/ready did not answer 200 within $READY_S s."; }
say "  /ready: 200 after $((SECONDS - run_start)) s (from docker run; $took s of polling)"
check_poem "$url"
curl -fsS -m 5 "$url/info" >"$WORK/info.json" || fail "GET /info failed."
python3 - "$WORK/info.json" <<'EOF' || fail "GET /info: $(head -c 600 "$WORK/info.json")"
import json, sys
info = json.load(open(sys.argv[1], encoding="utf-8"))
print(f"docker_test:   GET /info: engine {info['engine']}, {info['precision']}, {info['device']}; "
      f"index {info['index']['used']} (baked in); max_batch_texts {info['limits']['max_batch_texts']}"
      " (TIANKONG_MAX_BATCH_TEXTS=7 honoured)")
sys.exit(not (info["engine"] == "onnx" and info["index"]["used"] == "bundled"
              and info["limits"]["max_batch_texts"] == 7))
EOF
curl -fsS -m 5 "$url/" >"$WORK/page.html" || fail "GET / failed."
grep -q '<html' "$WORK/page.html" || fail "GET / is not the page: $(head -c 200 "$WORK/page.html")"
say "  GET /: the page ($(wc -c <"$WORK/page.html") bytes)"
uid="$(docker exec "$RUN_ID" id -u)"
[[ $uid != 0 ]] || fail "the container runs as root."
say "  user: uid $uid ($(docker exec "$RUN_ID" id -un))"
health=""
for _ in $(seq 40); do
    health="$(docker inspect -f '{{.State.Health.Status}}' "$RUN_ID")"
    [[ $health == starting ]] || break
    sleep 0.5
done
[[ $health == healthy ]] || fail "HEALTHCHECK: $health ($(docker inspect -f '{{json .State.Health.Log}}' "$RUN_ID" | head -c 300))"
say "  HEALTHCHECK (GET /ready): healthy"
stop_start=$(date +%s.%N)
docker kill --signal TERM "$RUN_ID" >/dev/null
code="$(timeout $((DRAIN_S + 10)) docker wait "$RUN_ID")" || fail "SIGTERM: still running $((DRAIN_S + 10)) s later."
stop_s="$(python3 -c "import time; print(f'{time.time() - $stop_start:.1f}')")"
[[ $code == 0 ]] || fail "SIGTERM: exit code $code."
python3 -c "import sys; sys.exit(not $stop_s <= $DRAIN_S)" \
    || fail "SIGTERM: stopped after $stop_s s, more than the drain timeout ($DRAIN_S s)."
say "  SIGTERM: exit code 0 after $stop_s s (drain timeout $DRAIN_S s)"
docker logs "$RUN_ID" >"$WORK/logs.txt" 2>&1
if grep -q Traceback "$WORK/logs.txt"; then
    cat "$WORK/logs.txt" >&2
    fail "docker logs has a traceback (the logs are above)."
fi
say "  docker logs: no traceback ($(wc -l <"$WORK/logs.txt") lines)"
docker rm -v "$RUN_ID" >/dev/null
# a random uid in group 0, as OpenShift runs an image: the baked cache must read as uid 10001's
docker run --rm --label "tiankong-test=$RUN_ID" --user 54321:0 --read-only --tmpfs /tmp \
    -e HF_HUB_OFFLINE=1 "$IMAGE" tiankong predict "$POEM" --json >"$WORK/uid.json" 2>"$WORK/uid.log" \
    || fail "docker run --user 54321:0 ... tiankong predict failed: $(tail -1 "$WORK/uid.log")"
python3 - "$WORK/uid.json" <<'EOF' || fail "docker run --user 54321:0: $(head -c 300 "$WORK/uid.json")"
import json, sys
top = json.load(open(sys.argv[1], encoding="utf-8"))["masks"][0][0]
print(f"docker_test:   docker run --user 54321:0 (a random uid, group 0): predict fills {top['token']} {top['score']:.3f}")
sys.exit(top["token"] != "鸟")
EOF
! grep -q "unusable" "$WORK/uid.log" || fail "docker run --user 54321:0: $(grep unusable "$WORK/uid.log" | head -1)"

# --- 6. compose ---------------------------------------------------------------------------
step "6. docker-compose -f docker/compose.yaml up"
if ! command -v docker-compose >/dev/null && [[ $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose </dev/null \
        >"$WORK/apt.log" 2>&1 || say "apt-get install docker-compose failed: $(tail -1 "$WORK/apt.log")"
fi
if ! docker-compose version --short >/dev/null 2>&1; then
    fail "docker-compose does not run here (apt-get install docker-compose), so docker/compose.yaml was not checked."
fi
port="$(http_port)"
export TIANKONG_PORT="$port" TIANKONG_IMAGE="$IMAGE"
COMPOSE_UP=1
docker-compose -p "$RUN_ID" -f docker/compose.yaml up -d --no-build >"$WORK/compose.log" 2>&1 \
    || { cat "$WORK/compose.log" >&2; fail "docker-compose up failed."; }
say "  docker-compose $(docker-compose version --short): up on 127.0.0.1:$port"
took="$(wait_ready "http://127.0.0.1:$port" "$READY_S")" \
    || { docker-compose -p "$RUN_ID" -f docker/compose.yaml logs | tail -20 >&2; fail "compose: /ready did not answer within $READY_S s."; }
say "  /ready: 200 after $took s"
check_poem "http://127.0.0.1:$port"
docker-compose -p "$RUN_ID" -f docker/compose.yaml down -v >"$WORK/compose.log" 2>&1 \
    || { cat "$WORK/compose.log" >&2; fail "docker-compose down failed."; }
COMPOSE_UP=""
say "  docker-compose down -v: done"

step "done"
left="$(docker ps -aq --filter "label=tiankong-test=$RUN_ID")"
[[ -z $left ]] || fail "containers left behind: $left"
say "OK: $IMAGE on $BASE_IMAGE, built in $BUILD_S s, $SIZE_MB MB; every check passed in $((SECONDS - T0)) s."
