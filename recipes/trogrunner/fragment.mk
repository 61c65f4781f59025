# The runner's login, owning its home and key (both made when the key was installed) and the
# installation's directory (where runs write their locks and address records); then the release:
# fetched (through _global's cache when set) only when its digest changed, checked, and swapped
# in whole.
trogrunner:
	id -u {{ args.user }} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {{ args.user }}
	chown {{ args.user }}: /home/{{ args.user }}
	chown -R {{ args.user }}: /home/{{ args.user }}/.ssh
	chmod 0700 /home/{{ args.user }}/.ssh
	mkdir -p /etc/trog-provisioner/recipes.d
	chown {{ args.user }}: /etc/trog-provisioner /etc/trog-provisioner/recipes.d
	if [ "$$(cat /opt/trog/.sha256 2>/dev/null)" != {{ args.release_sha256 }} ]; then \
	  curl -fsS --max-time 900 -o /opt/trog-release.tar.gz {{ args.release_url }} && \
	  echo {{ args.release_sha256 }}'  /opt/trog-release.tar.gz' | sha256sum -c --quiet && \
	  rm -rf /opt/trog.new && mkdir -p /opt/trog.new && \
	  tar -xzf /opt/trog-release.tar.gz -C /opt/trog.new && \
	  test -x /opt/trog.new/trog && test -d /opt/trog.new/recipes && \
	  echo {{ args.release_sha256 }} > /opt/trog.new/.sha256 && \
	  rm -rf /opt/trog && mv /opt/trog.new /opt/trog && rm -f /opt/trog-release.tar.gz; \
	fi
	test "$$(cat /opt/trog/.sha256)" = {{ args.release_sha256 }}
