#!/usr/bin/env bash
# Keeps every first-party plugin image's manifest label in step with its
# manifest.json (D-42): manifest.json is the source, and the Dockerfile's
# final stage carries it, compacted, as LABEL io.openfief.plugin.manifest.
#
#   hack/build/plugin-labels.sh write   rewrite each plugins/*/Dockerfile's label
#   hack/build/plugin-labels.sh check   fail when a label differs from manifest.json
#
# Both parse each manifest with the operator's own ParseManifestLabel, and
# check refuses a Dockerfile whose final stage lacks the label or the numeric
# USER 65532:65532. Needs only Go (the work is in hack/build/pluginlabels).
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
write | check) ;;
*)
	echo "usage: $0 write|check" >&2
	exit 2
	;;
esac
exec go run ./hack/build/pluginlabels "$1" plugins
