#!/bin/sh
# Installs Keycloak for the interop tests (go test -tags interop
# ./interop/..., TestKeycloak): its server distribution from Maven Central,
# fetched with mvn (the artifact stays in ~/.m2), unpacked, built once for
# the tests' options (kc.sh build) and started once to create its database,
# in a cache shared by every clone on this machine:
#
#   ${EXTAUTH_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/extauth-interop}/keycloak-<version>
#
# and linked here as dist. Idempotent: a second run finds the cache and
# only checks Java. A step that fails says which and why, with the end of
# Keycloak's own output.
#
# Needs: a JDK or JRE that Keycloak supports (17, 21 or 25: JAVA_HOME, else
# java on PATH; Debian: apt-get install openjdk-17-jre-headless) and Maven
# (apt-get install maven), which .ci/run installs.
set -eu
cd "$(dirname "$0")"
here=$PWD

KEYCLOAK_VERSION=26.7.3
# What the tests run: an H2 database in a file (data/h2, created here and
# copied by each test run), DPoP. kc.sh build bakes these into lib/quarkus,
# so that each test run starts with --optimized, without the 20 s rebuild.
BUILD_OPTIONS="--db=dev-file --features=dpop"
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
stamp="keycloak $KEYCLOAK_VERSION; build $BUILD_OPTIONS; primed"

fail() {
	echo "interop/keycloak/install.sh: $*" >&2
	exit 1
}

# Java: Keycloak 26 runs on Java 17, 21 and 25.
java=java
if [ -n "${JAVA_HOME:-}" ]; then
	java=$JAVA_HOME/bin/java
fi
command -v "$java" >/dev/null 2>&1 ||
	fail "no Java ($java): Keycloak $KEYCLOAK_VERSION needs Java 17, 21 or 25 (Debian: apt-get install openjdk-17-jre-headless, or set JAVA_HOME)"
java=$(command -v "$java")
java_version=$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
case "$java_version" in
17 | 21 | 25) ;;
*) fail "$java is Java ${java_version:-of an unknown version}: Keycloak $KEYCLOAK_VERSION needs Java 17, 21 or 25 (Debian: apt-get install openjdk-17-jre-headless, or set JAVA_HOME)" ;;
esac
echo "java: $java (Java $java_version)"

cache=${EXTAUTH_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/extauth-interop}
home=$cache/keycloak-$KEYCLOAK_VERSION
mkdir -p "$cache"

link() {
	# The tests run the Java this script checked.
	printf '%s\n' "$java" >"$home/.extauth-java.tmp" && mv "$home/.extauth-java.tmp" "$home/.extauth-java"
	ln -sfn "$home" "$here/dist"
	echo "keycloak $KEYCLOAK_VERSION: $home (linked as interop/keycloak/dist)"
}

if [ "$(cat "$home/.extauth-installed" 2>/dev/null)" = "$stamp" ]; then
	link
	exit 0
fi

# One install at a time per machine; a second waits for the first and then
# finds its result.
exec 9>"$cache/keycloak.lock"
flock 9
if [ "$(cat "$home/.extauth-installed" 2>/dev/null)" = "$stamp" ]; then
	link
	exit 0
fi

command -v mvn >/dev/null 2>&1 || fail "mvn is missing: Keycloak's distribution is fetched from Maven Central with it (Debian: apt-get install maven)"
work=$(mktemp -d "$cache/keycloak-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/keycloak.log

echo "fetching org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION (tar.gz) with mvn"
if ! mvn -B -q "$DEPENDENCY_PLUGIN:copy" \
	-Dartifact="org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:tar.gz" \
	-DoutputDirectory="$work" >"$log" 2>&1; then
	tail -n 40 "$log" >&2
	fail "mvn could not fetch org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION from Maven Central (its output is above)"
fi
mkdir "$work/dist"
tar -xzf "$work/keycloak-quarkus-dist-$KEYCLOAK_VERSION.tar.gz" -C "$work/dist" --strip-components=1 ||
	fail "the distribution's archive does not unpack"
rm "$work/keycloak-quarkus-dist-$KEYCLOAK_VERSION.tar.gz"

echo "kc.sh build $BUILD_OPTIONS"
# shellcheck disable=SC2086 # one word per option
if ! JAVA=$java "$work/dist/bin/kc.sh" build $BUILD_OPTIONS >"$log" 2>&1; then
	tail -n 40 "$log" >&2
	fail "kc.sh build failed (its output is above)"
fi

# A first start creates the database (schema and master realm, 20 to 40 s)
# once, here, rather than in every test run. Port 0: Keycloak takes a free
# port and logs which.
echo "first start, to create the database"
JAVA=$java "$work/dist/bin/kc.sh" start --optimized --cache=local --http-enabled=true \
	--hostname-strict=false --http-host=127.0.0.1 --http-port=0 >"$log" 2>&1 &
pid=$!
started=""
i=0
while [ "$i" -lt 600 ]; do
	if grep -q 'Listening on: http://127.0.0.1:' "$log"; then
		started=1
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.5
	i=$((i + 1))
done
if [ -z "$started" ]; then
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	tail -n 40 "$log" >&2
	fail "Keycloak did not start within 5 minutes, or exited (its output is above)"
fi
kill "$pid"
wait "$pid" || true
[ -f "$work/dist/data/h2/keycloakdb.mv.db" ] || fail "Keycloak started but left no database in data/h2"
# Only the database is kept: each test run copies it into a directory of
# its own.
find "$work/dist/data" -mindepth 1 -maxdepth 1 ! -name h2 -exec rm -rf {} +
rm -f "$work/dist/data/h2/"*.trace.db

rm -rf "$home"
mv "$work/dist" "$home"
printf '%s\n' "$stamp" >"$home/.extauth-installed"
link
