# Package installation for the whole guest: every recipe's packages for {{ distro }} {{ release }}.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold

ubuntu:
{%- if global.mirror is defined and global.mirror %}
	printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports %s-security\nComponents: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' {{ global.mirror }} {{ release }} {{ release }} {{ release }} {{ release }} > /etc/apt/sources.list.d/ubuntu.sources
{%- endif %}
	$(APT_GET) update
{%- if args.upgrade %}
	$(APT_GET) upgrade
{%- endif %}
	$(APT_GET) install --no-install-recommends {{ packages }}
