# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
# apt itself asks again when a mirror's connection fails (three times, 1, 2 and 4 s apart) and
# turns to the next mirror of a list when one answers an error, but it never asks a mirror again
# after an error answer: one 503 from a cache whose upstream hiccuped fails the whole command.
# So a command that failed runs again after a pause, twice (10 s, then 30 s: time for a cache or
# a mirror guest to come back), before the finish fails.
APT_AGAIN := sh -c 'for pause in 10 30 -; do "$$@" && exit 0; test "$$pause" = - && exit 1; echo "apt failed; trying again in $$pause s" >&2; sleep "$$pause"; done' apt-again env

# Whether every package named is installed, and installed on purpose rather than pulled in by
# another (apt's extended_states marks those). `upgrade` with such names installs and marks
# nothing more than `upgrade` alone, yet apt resolves twice: 5.6 s against 2.5 s on an emulated
# guest (bench/README.md). A name with a version or a release in it is never taken as in place.
APT_NAMED_IN_PLACE := sh -c 'test $$\# -gt 0 || exit 1; for name; do case $$name in *[!a-z0-9+.-]*) exit 1;; esac; done; \
	test "$$(dpkg-query -W --showformat="\$${db:Status-Abbrev}\n" "$$@" 2>/dev/null | grep -c "^ii ")" -eq $$\# || exit 1; \
	auto=$$(awk "/^Package:/ { name = \$$2 } /^Auto-Installed: 1/ { print name }" /var/lib/apt/extended_states 2>/dev/null); \
	for name; do printf "%s\n" "$$auto" | grep -qxF -- "$$name" && exit 1; done; exit 0' apt-named-in-place

# What an upgrade's outcome rests on besides apt's configuration: the package lists, what dpkg
# has installed, which packages were installed on purpose, and apt's pins. Its digest is kept
# after every upgrade this target runs (APT_UPGRADED); an upgrade over the same state again would
# spend seconds resolving to nothing (3 s on an emulated guest), so it is left out.
APT_STATE := { stat -c '%n %s %Y' /var/lib/apt/lists/*_Packages*; md5sum /var/lib/dpkg/status /var/lib/apt/extended_states; cat /etc/apt/preferences /etc/apt/preferences.d/*; } 2>/dev/null | md5sum
APT_UPGRADED := /var/lib/trog/ubuntu/apt-upgraded

# With fallbacks, apt reads the mirrors from a list (`mirror+file:`) and turns to the next one
# when one fails a request; each line's priority keeps the order they are written in (without
# one, apt picks an order of its own, and a guest could ask the archive before the mirror).
# The sources get a file of trog's own name: the seed's bootcmd, which cloud-init runs on every
# boot, removes the image's own ubuntu.sources (and one an older trog wrote there).
{%- set primary = "mirror+file:/etc/apt/mirrors/trog-ubuntu.list" if global.fallback_mirrors is defined and global.fallback_mirrors else global.mirror %}
ubuntu-sources:
{%- if global.mirror is defined and global.mirror %}
{%- if global.fallback_mirrors is defined and global.fallback_mirrors %}
	mkdir -p /etc/apt/mirrors
	printf '%s\tpriority:%s\n' {{ global.mirror }} 1{% for fallback in global.fallback_mirrors %} {{ fallback }} {{ loop.index + 1 }}{% endfor %} > /etc/apt/mirrors/trog-ubuntu.list
{%- endif %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports %s-security\nComponents: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' {{ primary }} {{ release }} {{ release }} {{ release }} {{ release }} > /etc/apt/sources.list.d/trog-ubuntu.sources
	rm -f /etc/apt/sources.list.d/ubuntu.sources
{%- else %}
	@true
{%- endif %}

{#- No translated package descriptions: a server guest never shows them, and fetching and parsing
    them is most of an `apt-get update` under emulation. The same file as images trog builds carry
    (src/images/build_debian.sh), so the lists and caches such an image brings stay current. #}
ubuntu: ubuntu-sources
	printf 'Acquire::Languages "none";\n' > /etc/apt/apt.conf.d/00trog-languages
{#- apt-get update throws apt's caches away and parses every list again, changed or not; without
    that, the install below keeps them while no list changed (an image's, the first boot's) and
    makes them again itself when one did. #}
	$(APT_AGAIN) $(APT_GET) -o pkgCacheFile::Generate=false update
{#- `upgrade` with packages named also installs them: one dpkg run instead of two when both have
    work. When every named package is in place (a root disk over a baked image, a guest finished
    before), `upgrade` alone does the same in half the time, unless it keeps a package back:
    named, that package would have been upgraded with its new dependencies, so then the full
    command runs after it; and when nothing an upgrade rests on changed since the last one
    (APT_STATE), neither runs. This is the target's last command: its `exit 0` ends it. #}
{%- if args.upgrade %}
	mkdir -p $(dir $(APT_UPGRADED))
	if $(APT_NAMED_IN_PLACE) {{ packages }}; then \
	  if [ "$$($(APT_STATE))" = "$$(cat $(APT_UPGRADED) 2>/dev/null)" ]; then \
	    echo "apt: nothing to upgrade: no list, installed package or pin changed since the last upgrade"; exit 0; \
	  fi; \
	  { $(APT_AGAIN) LC_ALL=C.UTF-8 $(APT_GET) upgrade --no-install-recommends; echo $$? > apt-upgrade.status; } 2>&1 | tee apt-upgrade.log; \
	  test "$$(cat apt-upgrade.status)" = 0 || exit 1; \
	  grep -q "kept back" apt-upgrade.log || { $(APT_STATE) > $(APT_UPGRADED); exit 0; }; \
	fi; \
	$(APT_AGAIN) $(APT_GET) upgrade --no-install-recommends {{ packages }} && $(APT_STATE) > $(APT_UPGRADED)
{%- else %}
	$(APT_AGAIN) $(APT_GET) install --no-install-recommends {{ packages }}
{%- endif %}
