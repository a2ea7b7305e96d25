# Sourced by build.sh, bench/*.sh and tests/conformance/*.sh: the Debian packages a script
# needs, installed when missing.
#
# install_missing NAME PACKAGE...: as root, installs the packages dpkg does not have;
# otherwise prints the apt-get line to run and exits 1. NAME prefixes the messages. On a
# system without dpkg, says what to install and goes on.
install_missing() {
	local name=$1 missing=() p
	shift
	if ! command -v dpkg-query >/dev/null; then
		echo "$name: not a Debian/Ubuntu system; install the equivalents of: $*" >&2
		return 0
	fi
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "$name: these packages are missing; install them and run this again:" >&2
		echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "$name: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || exit 1
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || exit 1
}
