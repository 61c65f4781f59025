# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold

debian:
{%- if global.mirror is defined and global.mirror %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://security.debian.org/debian-security\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' '{{ global.mirror }}' '{{ release }}' '{{ release }}' '{{ release }}' > /etc/apt/sources.list.d/debian.sources
	rm -f /etc/apt/sources.list
{%- endif %}
	$(APT_GET) update
{%- if args.upgrade %}
	$(APT_GET) upgrade
{%- endif %}
	$(APT_GET) install --no-install-recommends {{ packages | join(" ") }}
