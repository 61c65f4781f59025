# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold

# With fallbacks, apt reads the mirrors from a list (`mirror+file:`) and turns to the next one
# when one fails a request.
{%- set primary = "mirror+file:/etc/apt/mirrors/trog-ubuntu.list" if global.fallback_mirrors is defined and global.fallback_mirrors else global.mirror %}
ubuntu-sources:
{%- if global.mirror is defined and global.mirror %}
{%- if global.fallback_mirrors is defined and global.fallback_mirrors %}
	mkdir -p /etc/apt/mirrors
	printf '%s\n' {{ global.mirror }}{% for fallback in global.fallback_mirrors %} {{ fallback }}{% endfor %} > /etc/apt/mirrors/trog-ubuntu.list
{%- endif %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports %s-security\nComponents: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' {{ primary }} {{ release }} {{ release }} {{ release }} {{ release }} > /etc/apt/sources.list.d/ubuntu.sources
{%- else %}
	@true
{%- endif %}

ubuntu: ubuntu-sources
	$(APT_GET) update
{%- if args.upgrade %}
	$(APT_GET) upgrade
{%- endif %}
	$(APT_GET) install --no-install-recommends {{ packages }}
