#!/usr/bin/env bash
# Bring Apache Kafka's broker, tools and Java client jars (tests/kafka/pom.xml) from Maven Central into
# a cache outside the checkout, and print the directory that holds them:
#
#   ${KAFKALOG_CACHE:-$HOME/.cache/kafkalog}/kafka-<version>/libs
#
# tests/kafka runs `java -cp '<that dir>/*' kafka.Kafka ...` from it. A second run finds the cache
# complete (the marker file is written only after a successful copy) and downloads nothing.
# Needs Maven and a JDK (the tests run Producer.java/Consumer.java with Java's source launcher, which
# needs the jdk.compiler module); as root with apt-get, what is missing is installed like setup.sh does.
# Everything but the final path goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=tests/kafka/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1)
[ -n "$VERSION" ] || { echo "kafka-jars: no <kafka.version> in $POM" >&2; exit 1; }
CACHE="${KAFKALOG_CACHE:-$HOME/.cache/kafkalog}"
DEST="$CACHE/kafka-$VERSION"
LIBS="$DEST/libs"
# the marker holds a digest of the pom: editing the pom (another version, another jar) refetches
DIGEST=$(sha256sum "$POM" | cut -c1-16)
MARKER="$DEST/complete-$DIGEST"

if [ -f "$MARKER" ] && [ -d "$LIBS" ]; then
  echo "$LIBS"
  exit 0
fi

apt_install() {  # apt_install PACKAGE...: only as root (or with sudo) on a Debian-like system
  local sudo=""
  [ "$(id -u)" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo="sudo"; } || return 1
  command -v apt-get >/dev/null 2>&1 || return 1
  echo "kafka-jars: installing $* (needed by the real-broker tests)" >&2
  $sudo apt-get update -qq >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

has_compiler() { java --list-modules 2>/dev/null | grep -q '^jdk.compiler@'; }
if ! has_compiler; then
  apt_install openjdk-17-jdk-headless || true
  has_compiler || { echo "kafka-jars: the Kafka tests need a JDK (Java's jdk.compiler module, for" \
    "'java Producer.java'); install one, e.g. openjdk-17-jdk-headless" >&2; exit 1; }
fi
if ! command -v mvn >/dev/null 2>&1; then
  apt_install maven || true
  command -v mvn >/dev/null 2>&1 || { echo "kafka-jars: Maven (mvn) is needed to fetch the Kafka jars;" \
    "install it (e.g. apt-get install maven)" >&2; exit 1; }
fi

echo "kafka-jars: fetching Apache Kafka $VERSION and its dependencies from Maven Central into $LIBS" >&2
rm -rf "$DEST"
mkdir -p "$DEST"
TMP="$DEST/libs.partial"
# the jars stay in Maven's own repository (~/.m2, or -Dmaven.repo.local from MAVEN_OPTS) too
if ! mvn -B -q -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
      -DoutputDirectory="$TMP" -DincludeScope=runtime 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2; then
  rm -rf "$DEST"
  echo "kafka-jars: FAILED: Maven could not fetch Apache Kafka $VERSION's jars (org.apache.kafka:kafka_2.13," \
    "kafka-tools, kafka-clients, log4j) from Maven Central; see Maven's output above" >&2
  exit 1
fi
ls "$TMP"/kafka_2.13-"$VERSION".jar "$TMP"/kafka-clients-"$VERSION".jar "$TMP"/kafka-tools-"$VERSION".jar >/dev/null \
  || { rm -rf "$DEST"; echo "kafka-jars: FAILED: Maven's copy lacks Kafka's jars" >&2; exit 1; }
mv "$TMP" "$LIBS"
echo "$VERSION $(ls "$LIBS" | wc -l) jars" > "$MARKER"
echo "$LIBS"
