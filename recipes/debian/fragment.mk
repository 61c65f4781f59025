# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold

# With a mirror, every suite comes from it, security included (from `security_mirror` when set):
# a guest that must reach the internet for its security updates has no mirror worth the name.
debian:
{%- if global.mirror is defined and global.mirror %}
{%- if global.security_mirror is defined and global.security_mirror %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' {{ global.mirror }} {{ release }} {{ release }} {{ global.security_mirror }} {{ release }} > /etc/apt/sources.list.d/debian.sources
{%- else %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' {{ global.mirror }} {{ release }} {{ release }} {{ release }} > /etc/apt/sources.list.d/debian.sources
{%- endif %}
	rm -f /etc/apt/sources.list
{%- endif %}
	$(APT_GET) update
{%- if args.upgrade %}
	$(APT_GET) upgrade
{%- endif %}
	$(APT_GET) install --no-install-recommends {{ packages }}
