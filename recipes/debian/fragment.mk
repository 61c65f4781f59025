# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold

# With a mirror, every suite comes from it, security included (from `security_mirror` when set):
# a guest that must reach the internet for its security updates has no mirror worth the name.
# With fallbacks, apt reads the mirrors from a list (`mirror+file:`) and turns to the next one
# when one fails a request.
{%- set primary = "mirror+file:/etc/apt/mirrors/trog-debian.list" if global.fallback_mirrors is defined and global.fallback_mirrors else global.mirror %}
{%- set security = "mirror+file:/etc/apt/mirrors/trog-debian-security.list" if global.fallback_security_mirrors is defined and global.fallback_security_mirrors else global.security_mirror %}
debian-sources:
{%- if global.mirror is defined and global.mirror %}
{%- if (global.fallback_mirrors is defined and global.fallback_mirrors) or (global.fallback_security_mirrors is defined and global.fallback_security_mirrors) %}
	mkdir -p /etc/apt/mirrors
{%- endif %}
{%- if global.fallback_mirrors is defined and global.fallback_mirrors %}
	printf '%s\n' {{ global.mirror }}{% for fallback in global.fallback_mirrors %} {{ fallback }}{% endfor %} > /etc/apt/mirrors/trog-debian.list
{%- endif %}
{%- if global.fallback_security_mirrors is defined and global.fallback_security_mirrors %}
	printf '%s\n' {{ global.security_mirror }}{% for fallback in global.fallback_security_mirrors %} {{ fallback }}{% endfor %} > /etc/apt/mirrors/trog-debian-security.list
{%- endif %}
{%- if global.security_mirror is defined and global.security_mirror %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' {{ primary }} {{ release }} {{ release }} {{ security }} {{ release }} > /etc/apt/sources.list.d/debian.sources
{%- else %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' {{ primary }} {{ release }} {{ release }} {{ release }} > /etc/apt/sources.list.d/debian.sources
{%- endif %}
	rm -f /etc/apt/sources.list
{%- else %}
	@true
{%- endif %}

debian: debian-sources
	$(APT_GET) update
{%- if args.upgrade %}
	$(APT_GET) upgrade
{%- endif %}
	$(APT_GET) install --no-install-recommends {{ packages }}
