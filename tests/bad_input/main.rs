//! A corpus of bad inputs, one per line, run against the real `trog` binary in a temporary
//! installation on a libvirt test-driver hypervisor: every file of an installation, every verb's
//! arguments and flags, names, sizes, credentials, the secret store and the fleet. Each must end
//! with its documented exit status, an `error:` and a `hint:`, no panic, no internal debug text,
//! the file and line where the fault is written, and nothing changed on disk (`harness::run` says
//! exactly what is checked).

mod harness;

use harness::*;

/// Exit statuses (README's table).
const USAGE: i32 = 2;
const CONFIG: i32 = 3;
const CREDENTIALS: i32 = 4;
const NO_PLACEMENT: i32 = 5;
const HYPERVISOR: i32 = 6;
const CONFLICT: i32 = 7;
const DAMAGED_STORE: i32 = 11;

const DRY: &str = "provision --dry-run example.test";
const HV: &str = "etc/hypervisors.conf";
const RECIPES: &str = "etc/recipes.yaml";
const STORE: &str = "etc/secrets.kdbx";
const USERS: &str = "etc/recipes.d/example.test/users.yaml";
const DATA: &str = "etc/recipes.d/example.test/data.tar.gz";

/// The first block of the installation's fleet file, to which a case adds lines.
fn hv1(extra: &str) -> String {
    format!("[hv1]\nlibvirt_uri = test://{{ROOT}}/node.xml\n{extra}")
}

/// `_base` with one `_global` line changed.
fn base_with(line: &str) -> String {
    format!(
        "_base:\n  _global:\n    admin_user: siteadmin\n    contact_email: ops@example.test\n    \
         distro: debian\n    {line}\n  adminconfig: {{}}\n"
    )
}

fn names_and_arguments() -> Vec<Case> {
    vec![
        case("domain with ;", "provision --dry-run a;b.test", USAGE).says("`;`"),
        case(
            "domain with ; and upper case",
            "provision --dry-run A;b.test",
            USAGE,
        )
        .says("`;`"),
        case("domain, one label", "provision --dry-run example", USAGE).says("parent domain"),
        case(
            "domain, upper case",
            "provision --dry-run Example.test",
            USAGE,
        )
        .says("lower case"),
        case(
            "domain, trailing dot",
            "provision --dry-run example.test.",
            USAGE,
        ),
        case("domain, empty label", "provision --dry-run a..test", USAGE),
        case(
            "domain, leading hyphen",
            "provision --dry-run -a.test",
            USAGE,
        )
        .no_hint(),
        case("domain, underscore", "provision --dry-run a_b.test", USAGE).says("`_`"),
        case("domain, tab", "provision --dry-run a\tb.test", USAGE).says("\\t"),
        case("domain, slash", "provision --dry-run ../etc.test", USAGE).says("`/`"),
        case("domain, empty", "status ", USAGE),
        case(
            "domain, 64-char label",
            &format!("status {}.test", "a".repeat(64)),
            USAGE,
        ),
        case(
            "domain, too long",
            &format!("status {}", ["abcdefghij"; 30].join(".")),
            USAGE,
        ),
        case("domain, unicode", "status wéb.example.test", USAGE).says("`é`"),
        case(
            "domain with no file",
            "provision --dry-run missing.example.test",
            CONFIG,
        )
        .says("missing.example.test.yaml"),
        case(
            "new_config, no file",
            "new_config other.example.test",
            CONFIG,
        ),
        case("new_config, bad domain", "new_config a;b.test", USAGE),
        case("status, bad domain", "status a;b", USAGE),
        case("destroy, bad domain", "destroy A.test", USAGE),
        case(
            "provision, --hypervisor with ;",
            "provision --dry-run --hypervisor h;v example.test",
            USAGE,
        )
        .says("`;`"),
        case(
            "provision, unknown --hypervisor",
            "provision --dry-run --hypervisor hv9 example.test",
            USAGE,
        )
        .says("hv9"),
        case(
            "destroy, unknown --hypervisor",
            "destroy --hypervisor hv9 example.test",
            USAGE,
        ),
        case(
            "preflight, unknown --hypervisor",
            "preflight --hypervisor hv9",
            USAGE,
        ),
        case(
            "provision, --timeout not a number",
            "provision --dry-run --timeout soon example.test",
            USAGE,
        )
        .no_hint(),
        case("fleet, --timeout negative", "fleet --timeout -1", USAGE).no_hint(),
        case("unknown verb", "provison example.test", USAGE).no_hint(),
        case("unknown flag", "provision --dryrun example.test", USAGE).no_hint(),
        case("no domain", "provision --dry-run", USAGE).no_hint(),
        case("destroy, two domains", "destroy a.test b.test", USAGE).no_hint(),
        case("backup, no domain nor --sweep", "backup", USAGE).no_hint(),
        case(
            "backup, --sweep with a domain",
            "backup --sweep example.test",
            USAGE,
        )
        .no_hint(),
        case("backup, bad domain", "backup A.test", USAGE),
        case(
            "backup, unknown --hypervisor",
            "backup --hypervisor hv9 example.test",
            USAGE,
        ),
        case("recipes, unknown recipe", "recipes nosuch", CONFIG).says("nosuch"),
        case("recipes, recipe with ;", "recipes ngi;nx", CONFIG),
        case(
            "recipes, --scaffold unknown",
            "recipes --scaffold nosuch",
            CONFIG,
        ),
        case(
            "new_guest, unknown recipe",
            "new_guest --hostname new.example.test nosuch",
            CONFIG,
        ),
        case(
            "new_guest, recipe twice",
            "new_guest --hostname new.example.test nginx nginx",
            USAGE,
        ),
        case(
            "new_guest, bad hostname",
            "new_guest --hostname new;example.test nginx",
            USAGE,
        )
        .says("`;`"),
        case(
            "new_guest, existing guest",
            "new_guest --hostname example.test nginx",
            CONFLICT,
        ),
        case(
            "new_guest, --memory 0",
            "new_guest --hostname new.example.test --memory 0 nginx",
            USAGE,
        ),
        case(
            "new_guest, --memory tiny",
            "new_guest --hostname new.example.test --memory 1M nginx",
            USAGE,
        ),
        case(
            "new_guest, --memory words",
            "new_guest --hostname new.example.test --memory lots nginx",
            USAGE,
        ),
        case(
            "new_guest, --memory huge",
            "new_guest --hostname new.example.test --memory 99999999999999T nginx",
            USAGE,
        ),
        case(
            "new_guest, --cpus 0",
            "new_guest --hostname new.example.test --cpus 0 nginx",
            USAGE,
        ),
        case(
            "new_guest, --cpus 100000",
            "new_guest --hostname new.example.test --cpus 100000 nginx",
            USAGE,
        ),
        case(
            "new_guest, --cpus -1",
            "new_guest --hostname new.example.test --cpus -1 nginx",
            USAGE,
        )
        .no_hint(),
        case(
            "new_guest, --size 0",
            "new_guest --hostname new.example.test --size 0 nginx",
            USAGE,
        ),
        case(
            "new_guest, --size 10X",
            "new_guest --hostname new.example.test --size 10X nginx",
            USAGE,
        ),
        case(
            "new_guest, --size 100M",
            "new_guest --hostname new.example.test --size 100M nginx",
            USAGE,
        ),
        case(
            "new_guest, machine recipe",
            "new_guest --hostname new.example.test vm",
            CONFIG,
        ),
        case(
            "--recipes names a missing file",
            "--recipes /nonexistent/recipes.yaml provision --dry-run example.test",
            CONFIG,
        ),
        case(
            "--hvconf names a missing file",
            "--hvconf /nonexistent/hv.conf fleet",
            CONFIG,
        )
        .says("/nonexistent/hv.conf"),
        case(
            "--hvconf missing, provision",
            "--hvconf {ROOT}/nope.conf provision --dry-run example.test",
            CONFIG,
        ),
        case(
            "--hvconf missing, preflight",
            "--hvconf {ROOT}/nope.conf preflight",
            CONFIG,
        ),
        case(
            "--hvconf missing, status",
            "--hvconf {ROOT}/nope.conf status example.test",
            CONFIG,
        ),
        case(
            "--hvconf names a folder",
            "--hvconf {ROOT}/home fleet",
            CONFIG,
        ),
        case(
            "installation folder missing",
            "--recipes {ROOT}/none.yaml new_config example.test",
            CONFIG,
        ),
        case(
            "--json, bad domain",
            "--json provision --dry-run a;b.test",
            USAGE,
        ),
        case(
            "--json, missing --hvconf",
            "--json --hvconf /nonexistent fleet",
            CONFIG,
        ),
        case("--credentials-wait 0", "--credentials-wait 0 fleet", USAGE).no_hint(),
    ]
}

fn guest_files() -> Vec<Case> {
    vec![
        case("memory 0", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: 0")))
            .says("recipes.d/example.test.yaml:"),
        case("memory 1 MiB", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("memory: 1"))),
        case("memory in KiB", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("memory: 1500K"))),
        case("memory negative", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("memory: -1024"))),
        case("memory words", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("memory: lots"))),
        case("memory overflows", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("memory: 99999999999999999999"),
        )),
        case("memory huge", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("memory: 18446744073709551615T"),
        )),
        case("memory a list", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("memory: [1024]"))),
        case("memory bigger than any hypervisor", DRY, NO_PLACEMENT)
            .edit(write(GUEST_FILE, guest_with("memory: 1T"))),
        case("size 0", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("memory: 1024\ncpus: 1\nsize: 0", "nginx: {}"),
            ))
            .says("recipes.d/example.test.yaml:"),
        case("size 0G", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: 0G", "nginx: {}"),
        )),
        case("size 1 byte", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: 1B", "nginx: {}"),
        )),
        case("size unit", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: 4X", "nginx: {}"),
        )),
        case("size 9 PiB", DRY, NO_PLACEMENT).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: 9000T", "nginx: {}"),
        )),
        case("cpus 0", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("memory: 1024\nsize: 4G\ncpus: 0", "nginx: {}"),
            ))
            .says("less than 1"),
        case("cpus negative", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\nsize: 4G\ncpus: -2", "nginx: {}"),
        )),
        case("cpus absurd", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("memory: 1024\nsize: 4G\ncpus: 100000", "nginx: {}"),
            ))
            .says("more than 255"),
        case("cpus beyond u32", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("memory: 1024\nsize: 4G\ncpus: 99999999999", "nginx: {}"),
            ))
            .says("more than 255"),
        case("cpus fraction", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\nsize: 4G\ncpus: 1.5", "nginx: {}"),
        )),
        case("cpus text", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\nsize: 4G\ncpus: two", "nginx: {}"),
        )),
        case("unknown setting", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memroy: 1024")))
            .says("memory"),
        case("setting of the installation only", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("mirror: ftp://x"))),
        case("bad ip", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("ips: [300.1.1.1/24]"))),
        case("ip without prefix list", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("ips: 10.0.0.1/24"))),
        case("bad gateway", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("gateway: gw"))),
        case("bad timezone", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("timezone: ../../etc/passwd"))),
        case("bad distro", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("distro: windows"))),
        case("bad hypervisor pin", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("hypervisor: h;v")))
            .says("`;`"),
        case("pin to unknown hypervisor", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("hypervisor: hv9"))),
        case("bad depends_on", DRY, CONFIG).edit(write(GUEST_FILE, guest_with("depends_on: db"))),
        case("bad alias", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("aliases: [\"w;w.example.test\"]"),
        )),
        case("image without digest", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("image: {url: http://x/i.qcow2}"),
        )),
        case("image bad digest", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("image: {url: http://x/i.qcow2, sha256: abc}"),
        )),
        case("CHANGEME left", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("contact_email: CHANGEME"))),
        case("tab indentation", DRY, CONFIG)
            .edit(write(GUEST_FILE, "example.test:\n\t_global: {}\n")),
        case("not YAML", DRY, CONFIG).edit(write(GUEST_FILE, "example.test: [unclosed\n")),
        case("empty file", DRY, CONFIG).edit(write(GUEST_FILE, "")),
        case("a list at the top", DRY, CONFIG).edit(write(GUEST_FILE, "- example.test\n")),
        case("wrong top key", DRY, CONFIG)
            .edit(write(GUEST_FILE, "www.example.test:\n  nginx: {}\n")),
        case("top key in upper case", DRY, CONFIG)
            .edit(write(GUEST_FILE, "Example.test:\n  nginx: {}\n")),
        case("two top keys", DRY, CONFIG)
            .edit(write(GUEST_FILE, "example.test: {}\nother.test: {}\n")),
        case("duplicate key", DRY, CONFIG).edit(write(
            GUEST_FILE,
            "example.test:\n  nginx: {}\n  nginx: {}\n",
        )),
        case("_global a list", DRY, CONFIG)
            .edit(write(GUEST_FILE, "example.test:\n  _global: [1]\n")),
        case("reserved section", DRY, CONFIG)
            .edit(write(GUEST_FILE, "example.test:\n  _globals: {}\n")),
        case("unknown recipe", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginks: {}")))
            .says("nginks"),
        case("recipe name with ;", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "\"ngi;nx\": {}")))
            .says("`;`"),
        case("recipe args not a mapping", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx: [80]"))),
        case("recipe arg unknown", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx: {prot: 80}"))),
        case("recipe arg wrong type", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx: {port: eighty}"))),
        case("recipe arg out of range", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx: {port: 70000}"))),
        case("recipe arg bad pattern", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("", "nginx: {client_max_body_size: big}"),
        )),
        case("distro recipe as a guest recipe", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "debian: {}"))),
        case("binary garbage", DRY, CONFIG).edit(write_bytes(GUEST_FILE, b"\xff\xfe\x00garbage")),
        case("guest file is a folder", DRY, CONFIG)
            .edit(remove(GUEST_FILE))
            .edit(dir(GUEST_FILE)),
        case("guest file links to /dev/zero", DRY, CONFIG)
            .edit(remove(GUEST_FILE))
            .edit(link(GUEST_FILE, "/dev/zero")),
    ]
}

/// A site archive (`data.tar.gz`) of one member, its name written as given.
fn site_archive(name: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(1);
    header.set_mode(0o644);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &b"x"[..]).unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gzip, &builder.into_inner().unwrap()).unwrap();
    gzip.finish().unwrap()
}

fn installation_files() -> Vec<Case> {
    vec![
        case("recipes.yaml missing", DRY, CONFIG).edit(remove(RECIPES)),
        case("recipes.yaml unknown top key", DRY, CONFIG).edit(write(RECIPES, "_base: {}\nextra: {}\n")),
        case("recipes.yaml not YAML", DRY, CONFIG).edit(write(RECIPES, "_base: {\n")),
        case("recipes.yaml _base a list", DRY, CONFIG).edit(write(RECIPES, "_base: [1]\n")),
        case("recipes.yaml no admin_user", DRY, CONFIG)
            .edit(write(RECIPES, "_base:\n  _global:\n    contact_email: ops@example.test\n"))
            .no_line(),
        case("recipes.yaml bad admin_user", DRY, CONFIG).edit(write(RECIPES, base_with("admin_user: Root;"))),
        case("recipes.yaml bad email", DRY, CONFIG).edit(write(RECIPES, base_with("contact_email: nobody"))),
        case("recipes.yaml bad mirror", DRY, CONFIG).edit(write(RECIPES, base_with("mirror: ftp://mirror"))),
        case("recipes.yaml memory 0 for every guest", DRY, CONFIG)
            .edit(write(RECIPES, base_with("memory: 0")))
            .edit(write(GUEST_FILE, guest("", "nginx: {}"))),
        case("recipes.yaml unknown base recipe", DRY, CONFIG).edit(write(RECIPES, base_with("timezone: Etc/UTC\n  nosuch: {}"))),
        case("recipes.yaml a folder", DRY, CONFIG).edit(remove(RECIPES)).edit(dir(RECIPES)),
        case("recipes.d missing", DRY, CONFIG).edit(remove("etc/recipes.d")),
        case("recipes.d file not a domain", DRY, CONFIG).edit(write("etc/recipes.d/www.yaml", "www: {}\n"))
            .says("www.yaml").no_line(),
        case("recipes.d file in upper case", DRY, CONFIG)
            .edit(write("etc/recipes.d/Www.example.test.yaml", "Www.example.test: {}\n"))
            .says("Www.example.test.yaml").no_line(),
        case("recipes.d file with ;", DRY, CONFIG).edit(write("etc/recipes.d/a;b.test.yaml", "x: {}\n")).says("`;`").no_line(),
        case("recipes.d file .yml", DRY, CONFIG).edit(write("etc/recipes.d/www.example.test.yml", "www.example.test: {}\n"))
            .says("www.example.test.yml").no_line(),
        case("recipes.d misnamed file, new_config", "new_config example.test", CONFIG)
            .edit(write("etc/recipes.d/notes.yaml", "x: 1\n")).no_line(),
        case("users.yaml not a list", DRY, CONFIG).edit(write(USERS, "name: alice\n")),
        case("users.yaml not YAML", DRY, CONFIG).edit(write(USERS, "- name: [alice\n")),
        case("users.yaml a user without name", DRY, CONFIG).edit(write(USERS, "- groups: sudo\n")),
        case("users.yaml a folder", DRY, CONFIG).edit(dir(USERS)),
        case("data.tar.gz a folder", DRY, CONFIG).edit(dir(DATA)),
        case("data.tar.gz links to /dev/zero", DRY, CONFIG).edit(link(DATA, "/dev/zero")),
        case("data.tar.gz not an archive", DRY, CONFIG).edit(write(DATA, "not a tarball")).no_line(),
        case("data.tar.gz a member climbing out", DRY, CONFIG)
            .edit(write_bytes(DATA, &site_archive("../../etc/evil")))
            .no_line()
            .says("`../../etc/evil` climbs out"),
        case("data.tar.gz a member climbing out midway", DRY, CONFIG)
            .edit(write_bytes(DATA, &site_archive("public/../../x")))
            .no_line(),
        case("recipe manifest not YAML", DRY, CONFIG).edit(write("recipes/nginx/recipe.yaml", "kind: [guest\n")),
        case("recipe manifest bad kind", DRY, CONFIG).edit(write("recipes/nginx/recipe.yaml", "kind: gust\n")),
        case("recipe manifest unknown key", DRY, CONFIG)
            .edit(write("recipes/ufw/recipe.yaml", "description: x\nkind: guest\nbogus: 1\n")),
        case("recipe manifest names a missing template", DRY, CONFIG).edit(remove("recipes/nginx/site.conf.j2")),
        case("recipe manifest bad args schema", DRY, CONFIG).edit(write(
            "recipes/ufw/recipe.yaml",
            "description: x\nkind: guest\nargs: {type: object, properties: {allow: {type: frobnicate}}}\n",
        )),
        case("recipe template syntax error", DRY, CONFIG).with_store().credentials().edit(write("recipes/nginx/site.conf.j2", "{% if %}\n")),
        case("recipe folder with a bad name", "recipes", CONFIG)
            .edit(write("recipes/Bad;Name/recipe.yaml", "description: x\nkind: guest\n")).no_line(),
        case("recipe requires an unknown recipe", DRY, CONFIG).edit(write(
            "recipes/ufw/recipe.yaml",
            "description: x\nkind: guest\nrequires: {nosuch: {}}\n",
        )),
    ]
}

fn fleet_files() -> Vec<Case> {
    vec![
        case("hv: no blocks", "fleet", CONFIG).edit(write(HV, "# nothing\n")).no_line(),
        case("hv: key outside a block", "fleet", CONFIG).edit(write(HV, "libvirt_uri = qemu:///system\n")),
        case("hv: no libvirt_uri", "fleet", CONFIG).edit(write(HV, "[hv1]\nreserve_memory = 1G\n")),
        case("hv: unknown key", "fleet", CONFIG).edit(write(HV, hv1("reserve_mem = 1G\n"))).says("reserve_memory"),
        case("hv: line without =", "fleet", CONFIG).edit(write(HV, hv1("reserve_memory 1G\n"))),
        case("hv: unclosed block", "fleet", CONFIG).edit(write(HV, "[hv1\nlibvirt_uri = qemu:///system\n")),
        case("hv: block name with ;", "fleet", CONFIG).edit(write(HV, "[h;v]\nlibvirt_uri = qemu:///system\n"))
            .says("`;`"),
        case("hv: empty block name", "fleet", CONFIG).edit(write(HV, "[]\nlibvirt_uri = qemu:///system\n")),
        case("hv: block twice", "fleet", CONFIG).edit(write(HV, format!("{}{}", hv1(""), hv1("")))),
        case("hv: key twice", "fleet", CONFIG).edit(write(HV, hv1("max_guests = 2\nmax_guests = 3\n"))),
        case("hv: uri garbage", "fleet", CONFIG).edit(write(HV, "[hv1]\nlibvirt_uri = not a uri\n")),
        case("hv: uri tcp", "fleet", CONFIG).edit(write(HV, "[hv1]\nlibvirt_uri = qemu+tcp://hv1/system\n")),
        case("hv: uri empty", "fleet", CONFIG).edit(write(HV, "[hv1]\nlibvirt_uri =\n")),
        case("hv: reserve_memory words", "fleet", CONFIG).edit(write(HV, hv1("reserve_memory = lots\n"))),
        case("hv: reserve_memory negative", "fleet", CONFIG).edit(write(HV, hv1("reserve_memory = -1\n"))),
        case("hv: reserve_disk unit", "fleet", CONFIG).edit(write(HV, hv1("reserve_disk = 5Q\n"))),
        case("hv: max_guests fraction", "fleet", CONFIG).edit(write(HV, hv1("max_guests = 2.5\n"))),
        case("hv: max_guests negative", "fleet", CONFIG).edit(write(HV, hv1("max_guests = -1\n"))),
        case("hv: cpu_overcommit 0", "fleet", CONFIG).edit(write(HV, hv1("cpu_overcommit = 0\n"))),
        case("hv: cpu_overcommit NaN", "fleet", CONFIG).edit(write(HV, hv1("cpu_overcommit = NaN\n"))),
        case("hv: cpu_overcommit inf", "fleet", CONFIG).edit(write(HV, hv1("cpu_overcommit = inf\n"))),
        case("hv: pool_path relative", "fleet", CONFIG).edit(write(HV, hv1("pool_path = vms\n"))),
        case("hv: pool_name with /", "fleet", CONFIG).edit(write(HV, hv1("pool_name = a/b\n"))),
        case("hv: partition outside /machine", "fleet", CONFIG).edit(write(HV, hv1("partition = /system\n"))),
        case("hv: domain_type xen", "fleet", CONFIG).edit(write(HV, hv1("domain_type = xen\n"))),
        case("hv: binary garbage", "fleet", CONFIG).edit(write_bytes(HV, b"\xff\xfe[\x00]")),
        case("hv: file is a folder", "fleet", CONFIG).edit(remove(HV)).edit(dir(HV)),
        case("hv: bad file, provision", DRY, CONFIG).edit(write(HV, hv1("domain_type = xen\n"))),
        case("hv: bad file, status", "status example.test", CONFIG).edit(write(HV, hv1("max_guests = x\n"))),
        case("hv: bad file, destroy", "destroy example.test", CONFIG).edit(write(HV, hv1("max_guests = x\n"))),
        case("fleet: the only hypervisor unreachable", DRY, HYPERVISOR)
            .edit(write(HV, "[hv1]\nlibvirt_uri = test://{ROOT}/missing.xml\n")),
        case("fleet: node without a pool, too small", DRY, NO_PLACEMENT)
            .edit(write("node.xml", "<node><cpu><active>1</active></cpu><memory>262144</memory></node>\n")),
        case("fleet: pinned hypervisor unreachable", DRY, HYPERVISOR)
            .edit(write(HV, format!("{}[hv2]\nlibvirt_uri = test://{{ROOT}}/missing.xml\n", hv1(""))))
            .edit(write(GUEST_FILE, guest_with("hypervisor: hv2"))),
        case("fleet: --hypervisor unreachable", "provision --dry-run --hypervisor hv2 example.test", HYPERVISOR)
            .with_store().credentials()
            .edit(write(HV, format!("{}[hv2]\nlibvirt_uri = test://{{ROOT}}/missing.xml\n", hv1("")))),
        case("fleet: max_guests reached", DRY, NO_PLACEMENT).edit(write(HV, hv1("max_guests = 0\n"))),
        case("fleet: a foreign domain of the guest's name", DRY, CONFLICT).with_store().credentials()
            .edit(write("node.xml", "<node><cpu><active>8</active></cpu><memory>16777216</memory>\
                <domain type='test'><name>example.test</name><memory unit='MiB'>512</memory><vcpu>1</vcpu><os><type>hvm</type></os></domain>\
                <pool type='dir'><name>trog</name><target><path>/vms</path></target></pool></node>\n")),
    ]
}

fn credentials_and_store() -> Vec<Case> {
    vec![
        case("no credentials, no terminal", DRY, CREDENTIALS).with_store(),
        case(
            "no credentials, no store, no terminal",
            "new_config --new-secret-store example.test",
            CREDENTIALS,
        ),
        // new_config asks no hypervisor: it makes a store only when asked.
        case(
            "new_config, no store",
            "new_config example.test",
            DAMAGED_STORE,
        )
        .says("trog new_config --new-secret-store DOMAIN"),
        case(
            "new_config --new-secret-store, a store there",
            "new_config --new-secret-store example.test",
            USAGE,
        )
        .with_store()
        .says("move"),
        case("credentials: no colon", DRY, CREDENTIALS).input("keepass corpus\n\n"),
        case("credentials: unknown name", DRY, CREDENTIALS)
            .input("keypass: x\n\n")
            .says("keepass"),
        case("credentials: a value where the name goes", DRY, CREDENTIALS).input("hunter2:x\n\n"),
        case("credentials: empty value", DRY, CREDENTIALS).input("keepass:\n\n"),
        case("credentials: twice", DRY, CREDENTIALS).input("keepass: a\nkeepass: b\n\n"),
        case("credentials: sudo only", DRY, CREDENTIALS)
            .input("sudo: x\n\n")
            .with_store(),
        case("credentials: upper case name", DRY, CREDENTIALS).input("KEEPASS: x\n\n"),
        case("credentials: endless line", DRY, CREDENTIALS).input(&"x".repeat(200_000)),
        case(
            "credentials: no blank line, input held open",
            "--credentials-wait 1 provision --dry-run example.test",
            CREDENTIALS,
        )
        .held_open("keepass: x\n")
        .says("within 1s"),
        case(
            "credentials: nothing, input held open",
            "--credentials-wait 1 new_config example.test",
            CREDENTIALS,
        )
        .held_open(""),
        case("credentials: wrong passphrase", DRY, CREDENTIALS)
            .with_store()
            .input("keepass: wrong\n\n"),
        case("store: not KeePass", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write(STORE, "not a database\n")),
        case("store: empty file", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write(STORE, "")),
        case("store: truncated", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write_bytes(
                STORE,
                &store_bytes()[..store_bytes().len() / 2],
            )),
        case("store: KeePass 1 signature", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write_bytes(
                STORE,
                b"\x03\xd9\xa2\x9a\x65\xfb\x4b\xb5\x00\x00\x00\x00",
            )),
        case("store: links to /dev/zero", DRY, DAMAGED_STORE)
            .credentials()
            .edit(link(STORE, "/dev/zero")),
        case("store: is a folder", DRY, DAMAGED_STORE)
            .credentials()
            .edit(dir(STORE)),
        case(
            "store: damaged, new_config",
            "new_config --out {ROOT}/home/out example.test",
            DAMAGED_STORE,
        )
        .credentials()
        .edit(write(STORE, "garbage")),
        case("store: secret reference missing", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(
                GUEST_FILE,
                guest(
                    "",
                    "nginx: {}\nmariadb: {root_password: \"secret:Sites/db/password\"}",
                ),
            )),
    ]
}

/// A guest recipe's manifest with `extra` lines after the required ones.
fn manifest_with(extra: &str) -> String {
    format!("description: x\nkind: guest\n{extra}")
}

const UFW: &str = "recipes/ufw/recipe.yaml";
const UFW_FRAGMENT: &str = "recipes/ufw/fragment.mk";
const NGINX_SITE: &str = "recipes/nginx/site.conf.j2";

/// More of every file: each kind of fault where it can be written, each answered at its line.
fn every_file_at_its_line() -> Vec<Case> {
    vec![
        // users.yaml
        case("users.yaml a user is text", DRY, CONFIG)
            .edit(write(USERS, "- alice\n"))
            .says("mapping"),
        case("users.yaml a name is a number", DRY, CONFIG).edit(write(USERS, "- name: 12\n")),
        case("users.yaml a name is empty", DRY, CONFIG).edit(write(USERS, "- name: \"\"\n")),
        case("users.yaml a name is a list", DRY, CONFIG).edit(write(USERS, "- name: [a, b]\n")),
        case("users.yaml duplicate key", DRY, CONFIG)
            .edit(write(USERS, "- name: alice\n  name: bob\n"))
            .says("second time"),
        case("users.yaml tab indentation", DRY, CONFIG)
            .edit(write(USERS, "- name: alice\n\tgroups: sudo\n")),
        case("users.yaml two documents", DRY, CONFIG)
            .edit(write(USERS, "- name: a\n---\n- name: b\n")),
        case("users.yaml a scalar", DRY, CONFIG).edit(write(USERS, "alice\n")),
        case("users.yaml the second user nameless", DRY, CONFIG)
            .edit(write(USERS, "- name: alice\n- groups: [sudo]\n"))
            .says("users.yaml:2:"),
        case("users.yaml bad, guest file changed too", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: 1024")))
            .edit(write(USERS, "name: alice\n"))
            .at(USERS),
        case("users.yaml binary garbage", DRY, CONFIG)
            .edit(write_bytes(USERS, b"\xff\xfe- name: a\n")),
        case("users.yaml a name with ;", DRY, CONFIG)
            .edit(write(USERS, "- name: alice\n- name: \"a;b\"\n"))
            .says("users.yaml:2:")
            .says("not a login name"),
        case("users.yaml a name like an option", DRY, CONFIG)
            .edit(write(USERS, "- name: \"-oops\"\n"))
            .says("not a login name"),
        case("users.yaml a name with a space", DRY, CONFIG)
            .edit(write(USERS, "- name: al ice\n")),
        case("users.yaml links to /dev/zero", DRY, CONFIG).edit(link(USERS, "/dev/zero")),
        // recipe manifests
        case("manifest requires itself", DRY, CONFIG)
            .edit(write(UFW, manifest_with("requires: {ufw: {}}\n"))),
        case("manifest bad file mode", DRY, CONFIG).edit(write(
            UFW,
            manifest_with(
                "files:\n  - template: fragment.mk\n    path: /etc/x\n    mode: \"999\"\n",
            ),
        )),
        case("manifest empty description", DRY, CONFIG)
            .edit(write(UFW, "description: \"\"\nkind: guest\n")),
        case("manifest args not an object schema", DRY, CONFIG)
            .edit(write(UFW, manifest_with("args: {type: string}\n"))),
        case("manifest distro section on a guest recipe", DRY, CONFIG).edit(write(
            UFW,
            manifest_with("distro: {default_release: x, releases: {}}\n"),
        )),
        case("manifest duplicate key", DRY, CONFIG)
            .edit(write(UFW, "description: x\nkind: guest\nkind: guest\n")),
        case("manifest packages not a mapping", DRY, CONFIG)
            .edit(write(UFW, manifest_with("packages: [ufw]\n"))),
        case("manifest tab indentation", DRY, CONFIG)
            .edit(write(UFW, "description: x\n\tkind: guest\n")),
        case("manifest empty", DRY, CONFIG)
            .edit(write(UFW, "\n"))
            .no_line(),
        case("manifest a list", DRY, CONFIG).edit(write(UFW, "- description\n")),
        case("manifest requires a distro recipe", DRY, CONFIG)
            .edit(write(UFW, manifest_with("requires: {debian: {}}\n"))),
        case("manifest requires in a cycle", DRY, CONFIG)
            .edit(write(
                UFW,
                manifest_with("requires: {nginx: {port: 8080}}\n"),
            ))
            .says("cycle"),
        // templates
        case("template undefined name", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(
                NGINX_SITE,
                "server {\n  listen {{ args.nope.deeper }};\n}\n",
            ))
            .says("site.conf.j2:2"),
        case("template unclosed tag", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(NGINX_SITE, "server {\n{{ args.port\n}\n")),
        case("template unknown filter", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(NGINX_SITE, "{{ args.port | frobnicate }}\n")),
        case("fragment template error", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(UFW_FRAGMENT, "ufw:\n\t{{ args.nope.deeper }}\n"))
            .says("fragment.mk:2"),
        case("fragment without its target", DRY, CONFIG)
            .with_store()
            .credentials()
            .edit(write(UFW_FRAGMENT, "other:\n\ttrue\n"))
            .no_line(),
        // recipes.yaml
        case("recipes.yaml duplicate key", DRY, CONFIG).edit(write(
            RECIPES,
            format!("{}  adminconfig: {{}}\n", base_with("timezone: Etc/UTC")),
        )),
        case("recipes.yaml tab indentation", DRY, CONFIG)
            .edit(write(RECIPES, "_base:\n\t_global: {}\n")),
        case("recipes.yaml two documents", DRY, CONFIG).edit(write(
            RECIPES,
            format!("{}---\n_base: {{}}\n", base_with("timezone: Etc/UTC")),
        )),
        case("recipes.yaml binary garbage", DRY, CONFIG)
            .edit(write_bytes(RECIPES, b"\x00\x01\xff")),
        case("recipes.yaml a scalar", DRY, CONFIG).edit(write(RECIPES, "hello\n")),
        case("recipes.yaml cpus text", DRY, CONFIG)
            .edit(write(RECIPES, base_with("cpus: many")))
            .edit(write(GUEST_FILE, guest("", "nginx: {}"))),
        case("recipes.yaml bad base recipe argument", DRY, CONFIG).edit(write(
            RECIPES,
            base_with("timezone: Etc/UTC\n  ufw: {logging: loud}"),
        )),
        case(
            "recipes.yaml pins every guest to an unknown hypervisor",
            DRY,
            CONFIG,
        )
        .edit(write(RECIPES, base_with("hypervisor: hv9")))
        .edit(write(GUEST_FILE, guest("", "nginx: {}"))),
        case("recipes.yaml a domain's section", DRY, CONFIG).edit(write(
            RECIPES,
            format!("{}example.test: {{}}\n", base_with("timezone: Etc/UTC")),
        )),
        case("recipes.yaml CHANGEME left", DRY, CONFIG)
            .edit(write(RECIPES, base_with("timezone: CHANGEME"))),
        // guest files
        case("guest two documents", DRY, CONFIG).edit(write(
            GUEST_FILE,
            format!("{}---\nexample.test: {{}}\n", guest_with("memory: 1024")),
        )),
        case("guest top key a scalar", DRY, CONFIG).edit(write(GUEST_FILE, "example.test: 3\n")),
        case("guest a scalar document", DRY, CONFIG).edit(write(GUEST_FILE, "example.test\n")),
        case("guest duplicate _global key", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\nmemory: 2048", "nginx: {}"),
        )),
        case("guest unknown release", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("release: potato"))),
        case("guest packages not a list", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("packages: vim"))),
        case("guest package name with ;", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("packages: [\"vim;rm\"]"))),
        case("guest bad resolver", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("resolvers: [dns.example]"))),
        case("guest bad search domain", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("search_domains: [\"a;b\"]"))),
        case("guest memory with a fraction", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: 1.5G"))),
        case("guest size negative", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: -4G", "nginx: {}"),
        )),
        case("guest size a boolean", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("memory: 1024\ncpus: 1\nsize: true", "nginx: {}"),
        )),
        case("guest ips not addresses", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("ips: [\"10.0.0.1/99\"]"))),
        case("guest gateway outside its network", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("ips: [10.0.0.5/24]\ngateway: 192.168.9.1"),
        ))
        .says("outside the subnet"),
        case("guest gateway outside its address_range's subnet", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with("address_range: 10.0.0.10-10.0.0.20/24\ngateway: 10.0.1.1"),
            ))
            .says("outside the subnet of `address_range`"),
        case("recipes.yaml gateway outside a guest's addresses", DRY, CONFIG)
            .edit(write(RECIPES, base_with("gateway: 192.168.9.1")))
            .edit(write(GUEST_FILE, guest_with("ips: [10.0.0.5/24]")))
            .says("recipes.yaml:"),
        case("guest image url not http", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with(&format!(
                "image: {{url: \"ftp://x/i.qcow2\", sha256: {}}}",
                "a".repeat(64)
            )),
        )),
        case("guest yes is not a boolean", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx: {}\nufw: {ssh: yes}"))),
        case("guest recipe arg a list item wrong", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("", "nginx: {}\nufw: {allow: [\"22/tcp; rm -rf /\"]}"),
        )),
        case("guest recipe args null then bad", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "nginx:\n  port: 0"))),
        case("guest machine recipe named", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("", "vm: {}"))),
        case("guest machine knob wrong", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("disk_bus: floppy"))),
        case("shared folder named twice", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with("shared_folders:\n    - {name: site, source: /srv/a, mount: /srv/a}\n    - {name: site, source: /srv/b, mount: /srv/b}"),
            ))
            .says("listed twice"),
        case("shared folders at one mount point", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with("shared_folders:\n    - {name: one, source: /srv/a, mount: /srv/x}\n    - {name: two, source: /srv/b, mount: /srv/x}"),
            ))
            .says("mounted at /srv/x"),
        case("shared folder over /etc", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with("shared_folders: [{name: conf, source: /srv/conf, mount: /etc}]"),
            ))
            .says("the guest's system needs"),
        case("shared folder mount relative", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: /srv/a, mount: srv/a}]"),
        )),
        case("shared folder mount through ..", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: /srv/a, mount: /srv/../etc}]"),
        )),
        case("shared folder mount with a space", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: /srv/a, mount: \"/srv/my site\"}]"),
        )),
        case("shared folder source relative", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: share, mount: /srv/a}]"),
        )),
        case("shared folder source is /", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: root, source: /, mount: /srv/a}]"),
        )),
        case("shared folder name upper case", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: Site, source: /srv/a, mount: /srv/a}]"),
        )),
        case("shared folder name too long for a tag", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with(&format!(
                "shared_folders: [{{name: {}, source: /srv/a, mount: /srv/a}}]",
                "a".repeat(40)
            )),
        )),
        case("shared folder without a source", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, mount: /srv/a}]"),
        )),
        case("shared folder readonly a word", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: /srv/a, mount: /srv/a, readonly: sometimes}]"),
        )),
        case("shared folder unknown key", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: [{name: site, source: /srv/a, mount: /srv/a, cache: always}]"),
        )),
        case("shared folders a mapping", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with("shared_folders: {name: site, source: /srv/a, mount: /srv/a}"),
        )),
        case("guest secret reference malformed", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("", "nginx: {}\nmariadb: {root_password: \"secret:only\"}"),
        )),
        case("guest memory of a hundred thousand digits", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with(&format!("memory: {}", "9".repeat(100_000))),
            ))
            .says("too large"),
        case(
            "guest timezone of a hundred thousand characters",
            DRY,
            CONFIG,
        )
        .edit(write(
            GUEST_FILE,
            guest_with(&format!("timezone: \"{}\"", "x/".repeat(50_000))),
        )),
        case("guest file anchors to nowhere", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: *nowhere"))),
        // hostile YAML: nesting and aliases past serde-saphyr's limits, told in words
        case("guest nested a thousand deep", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with(&format!("memory: {}{}", "[".repeat(1000), "]".repeat(1000))),
            ))
            .says("nested deeper"),
        case("guest nested seventy deep", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest_with(&format!("memory: {}{}", "[".repeat(70), "]".repeat(70))),
        )),
        case("guest alias bomb", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                format!(
                    "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n{}example.test:\n  _global: {{}}\n",
                    (1..12)
                        .map(|n| format!(
                            "a{n}: &a{n} [{}]\n",
                            vec![format!("*a{}", n - 1); 10].join(", ")
                        ))
                        .collect::<String>()
                ),
            ))
            .says("configuration file may"),
        case("users.yaml nested a thousand deep", DRY, CONFIG).edit(write(
            USERS,
            format!("{}{}", "[".repeat(1000), "]".repeat(1000)),
        )),
        case("recipes.yaml nested a thousand deep", DRY, CONFIG).edit(write(
            RECIPES,
            format!("_base: {}{}\n", "{a: ".repeat(500), "}".repeat(500)),
        )),
        case("manifest nested a thousand deep", DRY, CONFIG).edit(write(
            UFW,
            manifest_with(&format!("args: {}{}\n", "[".repeat(1000), "]".repeat(1000))),
        )),
        // hypervisors.conf
        case("hv: max_guests beyond u32", "fleet", CONFIG)
            .edit(write(HV, hv1("max_guests = 99999999999\n"))),
        case("hv: reserve_memory with a fraction", "fleet", CONFIG)
            .edit(write(HV, hv1("reserve_memory = 1.5X\n"))),
        case("hv: cpu_overcommit negative", "fleet", CONFIG)
            .edit(write(HV, hv1("cpu_overcommit = -2\n"))),
        case("hv: cpu_overcommit text", "fleet", CONFIG)
            .edit(write(HV, hv1("cpu_overcommit = lots\n"))),
        case("hv: pool_name empty", "fleet", CONFIG).edit(write(HV, hv1("pool_name =\n"))),
        case("hv: uri ssh without host", "fleet", CONFIG)
            .edit(write(HV, "[hv1]\nlibvirt_uri = qemu+ssh:///system\n")),
        case("hv: second block bad", "fleet", CONFIG)
            .edit(write(
                HV,
                format!(
                    "{}[hv2]\nlibvirt_uri = test:///default\nmax_guests = x\n",
                    hv1("")
                ),
            ))
            .says("hypervisors.conf:5"),
        case("hv: block name with space", "fleet", CONFIG)
            .edit(write(HV, "[hv 1]\nlibvirt_uri = qemu:///system\n")),
        case("hv: text after the block", "fleet", CONFIG)
            .edit(write(HV, "[hv1] extra\nlibvirt_uri = qemu:///system\n")),
        case("hv: key without a value name", "fleet", CONFIG).edit(write(HV, hv1("= 3\n"))),
        case("hv: uri ssh host like an option", "fleet", CONFIG)
            .edit(write(HV, "[hv1]\nlibvirt_uri = qemu+ssh://-oProxyCommand=touch${IFS}x/system\n"))
            .says("starts with `-`"),
        case("hv: uri ssh login like an option", "fleet", CONFIG)
            .edit(write(
                HV,
                "[hv1]\nlibvirt_uri = qemu+ssh://-oProxyCommand=x@hv1.example.test/system\n",
            ))
            .says("the login `-oProxyCommand=x`"),
        case("hv: uri with a space", "fleet", CONFIG)
            .edit(write(HV, "[hv1]\nlibvirt_uri = qemu+ssh://ro ot@hv1.example.test/system\n"))
            .says("a space"),
        case("hv: uri with a comment after it", "fleet", CONFIG)
            .edit(write(HV, "[hv1]\nlibvirt_uri = test://{ROOT}/node.xml ; the lab\n"))
            .says("hypervisors.conf:2"),
        case("hv: byte order mark", "fleet", CONFIG)
            .edit(write(HV, format!("\u{feff}{}", hv1(""))))
            .says("byte order mark"),
        case("hv: a line of escape sequences", "fleet", CONFIG)
            .edit(write(HV, hv1("\u{1b}]0;title\u{7}\u{1b}[2J\n")))
            .says("`\\x1b]0;title\\x07\\x1b[2J`"),
        case("hv: bad file, backup", "backup example.test", CONFIG)
            .edit(write(HV, hv1("max_guests = x\n"))),
        case("hv: bad file, snapshot", "snapshot example.test", CONFIG)
            .edit(write(HV, hv1("max_guests = x\n"))),
        case(
            "hv: bad file named by --hvconf",
            "--hvconf {ROOT}/home/hv.conf fleet",
            CONFIG,
        )
        .edit(write("home/hv.conf", "[hv1]\nlibvirt_uri = nope\n")),
        case(
            "--recipes names a bad file",
            "--recipes {ROOT}/home/r.yaml provision --dry-run example.test",
            CONFIG,
        )
        .edit(write("home/r.yaml", "_base: [\n")),
    ]
}

/// More arguments, names and sizes: each refused before anything is read or changed.
fn more_arguments() -> Vec<Case> {
    vec![
        case("--wait not a number", "--wait soon fleet", USAGE).no_hint(),
        case("--wait negative", "--wait -5 fleet", USAGE).no_hint(),
        case(
            "--credentials-wait words",
            "--credentials-wait soon fleet",
            USAGE,
        )
        .no_hint(),
        case("snapshot, bad domain", "snapshot a;b.test", USAGE),
        case("restore, bad domain", "restore --latest A.test", USAGE),
        case(
            "debug_boot, bad domain",
            "debug_boot --console a..test",
            USAGE,
        ),
        case("status, domain with space", "status a b.test", USAGE).no_hint(),
        case(
            "new_config, domain upper case",
            "new_config Example.test",
            USAGE,
        ),
        case("assign_ip, bad domain", "assign_ip a;b.test", USAGE),
        case("domain, only dots", "status ...", USAGE),
        case("domain, NUL-like escape", "status a\\0b.test", USAGE),
        case(
            "domain, 253 characters and more",
            &format!("status {}.test", ["a"; 130].join(".")),
            USAGE,
        ),
        case(
            "new_guest, no recipes",
            "new_guest --hostname new.example.test",
            USAGE,
        )
        .no_hint(),
        case(
            "new_guest, --size with a fraction",
            "new_guest --hostname new.example.test --size 1.5Q nginx",
            USAGE,
        ),
        case(
            "new_guest, --memory negative",
            "new_guest --hostname new.example.test --memory -5 nginx",
            USAGE,
        )
        .no_hint(),
        case(
            "new_guest, recipe with ;",
            "new_guest --hostname new.example.test ngi;nx",
            CONFIG,
        )
        .no_line(),
        case(
            "new_guest, distro recipe",
            "new_guest --hostname new.example.test debian",
            CONFIG,
        ),
        case("recipes, upper case name", "recipes NGINX", CONFIG),
        case(
            "recipes, machine recipe scaffold",
            "recipes --scaffold vm",
            CONFIG,
        ),
        case(
            "preflight, --hypervisor with ;",
            "preflight --hypervisor h;v",
            USAGE,
        ),
        case(
            "status, unknown --hypervisor",
            "status --hypervisor hv9 example.test",
            USAGE,
        ),
        case(
            "snapshot, unknown --hypervisor",
            "snapshot --hypervisor hv9 example.test",
            USAGE,
        ),
        case(
            "assign_ip without any address range",
            "assign_ip example.test",
            CONFIG,
        )
        .says("address_range"),
        case(
            "assign_ip --network without a range",
            "assign_ip --network bridge:br9 example.test",
            CONFIG,
        )
        .says("bridge:br9"),
        case(
            "assign_ip of a guest file gone wrong",
            "assign_ip example.test",
            CONFIG,
        )
        .edit(write(GUEST_FILE, guest_with("memory: 0"))),
        case(
            "image build --release with ;",
            "image build --release a;b",
            USAGE,
        )
        .says("`a;b` is not a release"),
        case(
            "image build --release empty",
            "image build --release=",
            USAGE,
        ),
        case(
            "image build --release climbing",
            "image build --release ../sid",
            USAGE,
        ),
        case(
            "image build --mirror without a host",
            "image build --mirror http://",
            USAGE,
        )
        .says("`http://` is not a mirror"),
        case(
            "image build --fallback-mirror without a host",
            "image build --fallback-mirror https:///debian",
            USAGE,
        )
        .says("`https:///debian`"),
        case("--json, unknown recipe", "--json recipes nosuch", CONFIG),
        case(
            "--json, bad guest file",
            "--json provision --dry-run example.test",
            CONFIG,
        )
        .edit(write(GUEST_FILE, guest_with("memory: 0"))),
        case(
            "--recipes names a folder",
            "--recipes {ROOT}/home provision --dry-run example.test",
            CONFIG,
        ),
        case(
            "--recipes links to /dev/zero",
            "--recipes /dev/zero provision --dry-run example.test",
            CONFIG,
        ),
    ]
}

/// A fleet whose only hypervisor cannot be reached: a loopback port nothing listens on. A case
/// refused for its arguments must be refused for them (usage), not for this (exit status 6).
const UNREACHABLE: &str = "[hv1]\nlibvirt_uri = qemu+ssh://root@127.0.0.1:9/system\n";

/// A case whose fleet cannot be reached, so that asking it would fail the case.
fn unreachable_fleet(name: &str, args: &str, status: i32) -> Case {
    case(name, args, status).edit(write(HV, UNREACHABLE))
}

/// Arguments refused while the command line is parsed: before the installation is read, a lock
/// taken (a lock file in etc/locks would show as a change) or a hypervisor asked.
fn refused_while_parsing() -> Vec<Case> {
    let long_name = "a".repeat(65);
    vec![
        unreachable_fleet(
            "snapshot --name ../x",
            "snapshot --name ../x example.test",
            USAGE,
        )
        .says("`/`"),
        unreachable_fleet(
            "snapshot --name a/b",
            "snapshot --name a/b example.test",
            USAGE,
        )
        .says("`/`"),
        unreachable_fleet(
            "snapshot --name .hidden",
            "snapshot --name .hidden example.test",
            USAGE,
        )
        .says("starts with"),
        unreachable_fleet(
            "snapshot --name=-x",
            "snapshot --name=-x example.test",
            USAGE,
        )
        .says("starts with"),
        unreachable_fleet(
            "snapshot --name with ;",
            "snapshot --name=a;b example.test",
            USAGE,
        )
        .says("`;`"),
        unreachable_fleet(
            "snapshot --name empty",
            "snapshot --name= example.test",
            USAGE,
        )
        .says("empty"),
        unreachable_fleet(
            "snapshot --name too long",
            &format!("snapshot --name {long_name} example.test"),
            USAGE,
        )
        .says("65 characters"),
        unreachable_fleet("snapshot --keep 0", "snapshot --keep 0 example.test", USAGE)
            .says("keeping 0 snapshots"),
        unreachable_fleet(
            "snapshot --keep=-1",
            "snapshot --keep=-1 example.test",
            USAGE,
        )
        .says("not a whole number"),
        unreachable_fleet(
            "snapshot --keep all",
            "snapshot --keep all example.test",
            USAGE,
        ),
        unreachable_fleet(
            "snapshot --delete empty",
            "snapshot --delete= example.test",
            USAGE,
        )
        .says("empty"),
        unreachable_fleet(
            "restore --name empty",
            "restore --name= example.test",
            USAGE,
        )
        .says("empty"),
        unreachable_fleet(
            "debug_boot --cat relative",
            "debug_boot --cat relative/path example.test",
            USAGE,
        )
        .says("absolute path"),
        unreachable_fleet(
            "debug_boot --ls relative",
            "debug_boot --ls etc example.test",
            USAGE,
        )
        .says("absolute path"),
        unreachable_fleet(
            "debug_boot --cat ~",
            "debug_boot --cat ~/x example.test",
            USAGE,
        ),
        unreachable_fleet(
            "debug_boot --cat empty",
            "debug_boot --cat= example.test",
            USAGE,
        ),
        unreachable_fleet(
            "debug_boot --cat with a newline",
            "debug_boot --cat /etc\nrm example.test",
            USAGE,
        ),
        unreachable_fleet(
            "debug_boot --silence 0",
            "debug_boot --console --silence 0 example.test",
            USAGE,
        )
        .says("out of range"),
        unreachable_fleet(
            "debug_boot --total 0",
            "debug_boot --console --total 0 example.test",
            USAGE,
        )
        .says("out of range"),
        unreachable_fleet(
            "debug_boot --silence past a day",
            "debug_boot --console --silence 86401 example.test",
            USAGE,
        ),
        unreachable_fleet(
            "debug_boot --total words",
            "debug_boot --console --total soon example.test",
            USAGE,
        )
        .says("whole number of seconds"),
        unreachable_fleet(
            "debug_boot --shot in a missing folder",
            "debug_boot --shot {ROOT}/nowhere/screen.png example.test",
            USAGE,
        )
        .says("folder does not exist"),
        unreachable_fleet(
            "debug_boot --shot a folder",
            "debug_boot --shot {ROOT}/home example.test",
            USAGE,
        )
        .says("is a folder"),
        unreachable_fleet(
            "status --timeout 0",
            "status --timeout 0 example.test",
            USAGE,
        )
        .says("out of range"),
        unreachable_fleet(
            "destroy --timeout 0",
            "destroy --timeout 0 example.test",
            USAGE,
        ),
        unreachable_fleet("fleet --timeout 0", "fleet --timeout 0", USAGE),
        unreachable_fleet(
            "backup --timeout 0",
            "backup --timeout 0 example.test",
            USAGE,
        ),
        unreachable_fleet(
            "restore --timeout 0",
            "restore --latest --timeout 0 example.test",
            USAGE,
        ),
        unreachable_fleet(
            "provision --timeout 0",
            "provision --dry-run --timeout 0 example.test",
            USAGE,
        ),
        unreachable_fleet(
            "snapshot --timeout past an hour",
            "snapshot --timeout 3601 example.test",
            USAGE,
        ),
        unreachable_fleet(
            "--timeout past u64",
            "status --timeout 18446744073709551616 example.test",
            USAGE,
        )
        .says("whole number of seconds"),
        unreachable_fleet(
            "--wait past a day",
            "--wait 86401 snapshot example.test",
            USAGE,
        ),
        unreachable_fleet(
            "--wait the largest number",
            "--wait 18446744073709551615 destroy example.test",
            USAGE,
        ),
        unreachable_fleet(
            "--credentials-wait past an hour",
            "--credentials-wait 3601 status example.test",
            USAGE,
        ),
        unreachable_fleet(
            "destroy --hypervisor h;v",
            "destroy --hypervisor h;v example.test",
            USAGE,
        )
        .says("`;`"),
        unreachable_fleet(
            "status --hypervisor h/v",
            "status --hypervisor h/v example.test",
            USAGE,
        )
        .says("`/`"),
        unreachable_fleet(
            "snapshot --hypervisor empty",
            "snapshot --hypervisor= example.test",
            USAGE,
        )
        .says("empty"),
        unreachable_fleet(
            "restore --hypervisor h;v",
            "restore --latest --hypervisor h;v example.test",
            USAGE,
        ),
        unreachable_fleet(
            "debug_boot --hypervisor h;v",
            "debug_boot --console --hypervisor h;v example.test",
            USAGE,
        ),
        unreachable_fleet(
            "backup --hypervisor h;v",
            "backup --hypervisor h;v example.test",
            USAGE,
        ),
        unreachable_fleet(
            "preflight --hypervisor h/v",
            "preflight --hypervisor h/v",
            USAGE,
        ),
        unreachable_fleet(
            "snapshot, bad domain, unreachable",
            "snapshot --keep 2 a/b.test",
            USAGE,
        )
        .says("`/`"),
        unreachable_fleet(
            "status, second domain bad",
            "status example.test a;b.test",
            USAGE,
        )
        .says("`;`"),
        unreachable_fleet(
            "debug_boot --keys text: without words",
            "debug_boot example.test --keys text:",
            USAGE,
        )
        .says("types nothing"),
        unreachable_fleet(
            "debug_boot --keys text with a tab",
            "debug_boot example.test --keys text:a\tb",
            USAGE,
        )
        .says("no key types: `\\t`"),
        unreachable_fleet(
            "debug_boot --keys an escape sequence",
            "debug_boot example.test --keys \u{1b}[2J",
            USAGE,
        )
        .says("unknown key `\\x1b[2J`"),
        unreachable_fleet(
            "inventory --known-hosts a device",
            "inventory --known-hosts /dev/null",
            USAGE,
        )
        .says("not a regular file"),
        unreachable_fleet(
            "inventory --known-hosts a folder",
            "inventory --known-hosts {ROOT}/home",
            USAGE,
        )
        .says("is a folder"),
        unreachable_fleet(
            "inventory --known-hosts in a missing folder",
            "inventory --known-hosts {ROOT}/nowhere/known_hosts",
            USAGE,
        )
        .says("folder does not exist"),
        unreachable_fleet(
            "inventory --known-hosts with a quote",
            "inventory --known-hosts {ROOT}/home/a\"b",
            USAGE,
        )
        .says("`/"),
        unreachable_fleet(
            "inventory --identity-file a folder",
            "inventory --format ansible --identity-file {ROOT}/home example.test",
            USAGE,
        )
        .says("is a folder"),
        unreachable_fleet(
            "inventory --identity-file in a missing folder",
            "inventory --format ansible --identity-file {ROOT}/nowhere/key example.test",
            USAGE,
        )
        .says("folder does not exist"),
        unreachable_fleet(
            "--json snapshot --keep 0",
            "--json snapshot --keep 0 example.test",
            USAGE,
        )
        .says("keeping 0 snapshots"),
    ]
}

/// `_base` with `contact_email` (and `extra`, a further `_global` line) as given.
fn base_with_email(email: &str, extra: &str) -> String {
    format!(
        "_base:\n  _global:\n    admin_user: siteadmin\n    contact_email: {email}\n    \
         distro: debian\n{extra}  adminconfig: {{}}\n"
    )
}

/// Values of settings: text without a bound or of the wrong shape, floats that are no number,
/// files that are not UTF-8 text.
fn setting_values() -> Vec<Case> {
    let megabyte_email = format!("{}@example.test", "a".repeat(1024 * 1024));
    let latin1_guest: &[u8] =
        b"example.test:\n  _global:\n    cpus: 1\n    size: 4G # caf\xe9\n  nginx: {}\n";
    vec![
        case("contact_email of a megabyte", DRY, CONFIG)
            .edit(write(RECIPES, base_with_email(&megabyte_email, "")))
            .says("at most 254"),
        case("contact_email with a space", DRY, CONFIG)
            .edit(write(RECIPES, base_with_email("ops@exa mple.test", "")))
            .says("not an email address"),
        case("contact_email with two @", DRY, CONFIG)
            .edit(write(RECIPES, base_with_email("ops@b@example.test", "")))
            .says("not an email address"),
        case("contact_email with no domain", DRY, CONFIG)
            .edit(write(RECIPES, base_with_email("ops@", "")))
            .says("not an email address"),
        case("contact_email with a newline", DRY, CONFIG)
            .edit(write(
                RECIPES,
                base_with_email("\"ops@example.test\\nBcc: x@example.test\"", ""),
            ))
            .says("control character"),
        case("release of 5000 characters", DRY, CONFIG)
            .edit(write(
                RECIPES,
                base_with_email(
                    "ops@example.test",
                    &format!("    release: {}\n", "b".repeat(5000)),
                ),
            ))
            .says("at most 4096"),
        case("mirror of 3000 characters", DRY, CONFIG)
            .edit(write(
                RECIPES,
                base_with_email(
                    "ops@example.test",
                    &format!("    mirror: http://m.example.test/{}\n", "d".repeat(3000)),
                ),
            ))
            .says("at most 2048"),
        case("memory .nan", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: .nan")))
            .says("not a number"),
        case("memory .NaN", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: .NaN")))
            .says("not a number"),
        case("memory .inf", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: .inf")))
            .says("infinity"),
        case("memory -.inf", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: -.inf")))
            .says("infinity"),
        case("memory 1e999", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("memory: 1e999")))
            .says("too large"),
        case("cpus .inf", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("cpus: .inf\nsize: 4G", "nginx: {}"),
            ))
            .says("infinity"),
        case("recipes.yaml .nan in _base", DRY, CONFIG)
            .edit(write(
                RECIPES,
                base_with_email("ops@example.test", "    memory: .nan\n"),
            ))
            .says("not a number"),
        case("guest file in Latin-1", DRY, CONFIG)
            .edit(write_bytes(GUEST_FILE, latin1_guest))
            .says("not UTF-8 text: line 4")
            .says("save the file as UTF-8"),
        case("recipes.yaml in Latin-1", DRY, CONFIG)
            .edit(write_bytes(
                RECIPES,
                b"_base:\n  _global:\n    admin_user: r\xe9mi\n",
            ))
            .says("line 3, column 18")
            .says("save the file as UTF-8"),
        case("hypervisors.conf in Latin-1", "fleet", CONFIG)
            .edit(write_bytes(
                HV,
                b"# h\xf4te\n[hv1]\nlibvirt_uri = test:///default\n",
            ))
            .says("line 1, column 4")
            .says("save the file as UTF-8"),
        case("hv: cpu_overcommit -inf", "fleet", CONFIG)
            .edit(write(HV, hv1("cpu_overcommit = -inf\n")))
            .says("not a finite number"),
        case("hv: cpu_overcommit nan, said so", "fleet", CONFIG)
            .edit(write(HV, hv1("cpu_overcommit = nan\n")))
            .says("not a finite number"),
        case("hv: pool_path climbing with ..", "fleet", CONFIG)
            .edit(write(HV, hv1("pool_path = /vms/../etc\n")))
            .says("`..`"),
        case("hv: pool_name of 5000 characters", "fleet", CONFIG)
            .edit(write(
                HV,
                hv1(&format!("pool_name = {}\n", "p".repeat(5000))),
            ))
            .says("at most 4096"),
        case("hv: libvirt_uri of 5000 characters", "fleet", CONFIG)
            .edit(write(
                HV,
                format!("[hv1]\nlibvirt_uri = test:///{}\n", "u".repeat(5000)),
            ))
            .says("at most 4096"),
        case("cpu_mode with markup", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("cpu_mode: \"a<b\"")))
            .says("`_global.cpu_mode`"),
        case("cpu_mode with a space, store locked", DRY, CONFIG)
            .with_store()
            .edit(write(GUEST_FILE, guest_with("cpu_mode: host passthrough"))),
        case("cpu_mode in _base", DRY, CONFIG)
            .edit(write(RECIPES, base_with("cpu_mode: \"Sky;lake\"")))
            .says("cpu-models"),
        case("address_range without gateway", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest_with("address_range: 192.0.2.10-192.0.2.20/24"),
            ))
            .says("without `gateway`"),
        case("address_range in _base without gateway", DRY, CONFIG)
            .edit(write(
                RECIPES,
                base_with("address_range: 192.0.2.10-192.0.2.20/24"),
            ))
            .says("set `gateway`"),
        case("tenant without an address", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("tenant: shop")))
            .says("has no static address"),
        case("users.yaml in Latin-1", DRY, CONFIG)
            .edit(write_bytes(USERS, b"- name: j\xfcrgen\n"))
            .says("not UTF-8"),
    ]
}

/// More credentials and store faults.
fn more_credentials() -> Vec<Case> {
    vec![
        case("credentials: name with spaces", DRY, CREDENTIALS).input("kee pass: x\n\n"),
        case("credentials: a NUL byte", DRY, CREDENTIALS)
            .input("keepass: a\0b\n\n")
            .with_store(),
        case("credentials: only a blank line", DRY, CREDENTIALS)
            .input("\n")
            .with_store(),
        case("credentials: sudo twice", DRY, CREDENTIALS).input("sudo: a\nsudo: b\n\n"),
        case("credentials: a comment line", DRY, CREDENTIALS)
            .input("# keepass: x\n\n")
            .with_store(),
        case("store: a random KDBX-looking header", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write_bytes(
                STORE,
                b"\x03\xd9\xa2\x9a\x67\xfb\x4b\xb5\x01\x00\x04\x00garbage",
            )),
        case("store: the last bytes cut", DRY, DAMAGED_STORE)
            .credentials()
            .edit(write_bytes(
                STORE,
                &store_bytes()[..store_bytes().len() - 16],
            )),
        case(
            "store: key file missing, named in the guest's file",
            DRY,
            CREDENTIALS,
        )
        .with_store()
        .edit(write(
            GUEST_FILE,
            guest_with("keepass_key_file: nowhere.key"),
        ))
        .no_line()
        .says("of the guest's file in recipes.d"),
        case("store: key file readable by others", DRY, CREDENTIALS)
            .credentials()
            .edit(write(STORE, "garbage"))
            .edit(write("etc/store.key", "key"))
            .edit(write(GUEST_FILE, guest_with("keepass_key_file: store.key")))
            .no_line(),
    ]
}

/// The file of another domain of the installation.
const OTHER_FILE: &str = "etc/recipes.d/other.test.yaml";

/// A domain's file whose `_global` is `global`, serving nginx.
fn domain_file(domain: &str, global: &str) -> String {
    let global: String = global.lines().map(|line| format!("    {line}\n")).collect();
    format!("{domain}:\n  _global:\n{global}  nginx: {{}}\n")
}

/// Domains that run on another's machine (`depends_on`) or on an existing host.
fn sites() -> Vec<Case> {
    vec![
        case("depends_on a domain without a file", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: nothere.test", "nginx: {}")))
            .says("no file in recipes.d"),
        case("depends_on a misspelt domain", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: othre.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "cpus: 1")))
            .says("did you mean other.test?"),
        case("depends_on itself", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: example.test", "nginx: {}")))
            .says("a cycle"),
        case("depends_on a cycle of two", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "depends_on: example.test")))
            .says("which depends on example.test"),
        case("depends_on a chain to a domain without a file", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "depends_on: gone.test")))
            .at(OTHER_FILE)
            .says("other.test depends on gone.test"),
        case("memory beside depends_on", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("depends_on: other.test\nmemory: 2048", "nginx: {}"),
            ))
            .says("is a setting of a machine"),
        case("ips beside depends_on", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("depends_on: other.test\nips: [192.0.2.9/24]", "nginx: {}"),
        )),
        case("admin_user beside depends_on", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("depends_on: other.test\nadmin_user: someone", "nginx: {}"),
        )),
        case("tenant beside depends_on", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("depends_on: other.test\ntenant: shop", "nginx: {}"),
        )),
        case("data volume beside depends_on", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("depends_on: other.test\ndata_volume_size: 1G", "nginx: {}"),
        )),
        case("mirror beside depends_on", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest(
                    "depends_on: other.test\nmirror: http://192.0.2.1/debian",
                    "nginx: {}",
                ),
            ))
            .says("is a setting of a machine's distribution"),
        case("release beside depends_on", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("depends_on: other.test\nrelease: trixie", "nginx: {}"),
            ))
            .says("its machine's `release` holds"),
        case("upgrade beside depends_on", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("depends_on: other.test\nupgrade: false", "nginx: {}"),
            ))
            .says("its machine's `upgrade` holds"),
        case("depends_on not a domain", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: [a.test]", "nginx: {}"))),
        case("depends_on in _base", DRY, CONFIG)
            .edit(write(RECIPES, base_with("depends_on: other.test")))
            .says("belongs to one domain"),
        case("existing_host in _base", DRY, CONFIG)
            .edit(write(RECIPES, base_with("existing_host: 192.0.2.7")))
            .says("belongs to one domain"),
        case("existing_host beside depends_on", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest("existing_host: 192.0.2.7\ndepends_on: other.test", "nginx: {}"),
            ))
            .says("not both"),
        case("existing_host not an address", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("existing_host: \"a;b\"", "nginx: {}")))
            .says("neither an IP address nor a DNS name"),
        case("existing_host a list", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest("existing_host: [192.0.2.7]", "nginx: {}"))),
        case("cpus beside existing_host", DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with("existing_host: 192.0.2.7")))
            .says("a setting of a guest trog builds"),
        case("hypervisor beside existing_host", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("existing_host: 192.0.2.7\nhypervisor: hv1", "nginx: {}"),
        )),
        case("image beside existing_host", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest(
                "existing_host: 192.0.2.7\nimage: {url: 'file:///i.qcow2', sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}",
                "nginx: {}",
            ),
        )),
        case("admin_user of an existing host not a login", DRY, CONFIG).edit(write(
            GUEST_FILE,
            guest("existing_host: 192.0.2.7\nadmin_user: \"Bad User\"", "nginx: {}"),
        )),
        case("destroy of an existing host", "destroy example.test", CONFLICT)
            .edit(write(GUEST_FILE, guest("existing_host: 192.0.2.7", "nginx: {}")))
            .no_line()
            .says("trog did not build"),
        case("authorized-key of a dependent", "authorized-key example.test", CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "cpus: 1")))
            .no_line()
            .says("`trog authorized-key other.test`"),
        case("status of a dependent in a cycle", "status example.test", CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "depends_on: example.test")))
            .says("a cycle"),
    ]
    .into_iter()
    .chain(verbs_about_a_guest_without_one())
    .chain([
        case("backup of a dependent whose machine was never built", "backup example.test", CONFIG)
            .edit(write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}")))
            .edit(write(OTHER_FILE, domain_file("other.test", "cpus: 1")))
            .says("`depends_on` of example.test (other.test's machine)")
            .says("`trog provision other.test`"),
        case("backup of an existing host without its key", "backup example.test", CONFIG)
            .edit(write(GUEST_FILE, guest("existing_host: 192.0.2.7", "nginx: {}")))
            .says("`existing_host` of example.test (example.test's machine)")
            .says("`trog provision example.test`"),
        case("status --all, installation-id a link", "status --all", CONFIG)
            .edit(write("elsewhere-id", "0b5ea0d1-3b7e-4a53-9a44-5d3c3b1e2f10\n"))
            .edit(link("etc/installation-id", "{ROOT}/elsewhere-id"))
            .no_line()
            .says("installation-id is a symbolic link"),
        case("status --all, installation-id not one", "status --all", CONFIG)
            .edit(write("etc/installation-id", "not an identity\n"))
            .no_line()
            .says("does not hold an identity trog wrote"),
    ])
    .collect()
}

/// `snapshot`, `restore` and `debug_boot` are about a guest trog built: a dependent and an
/// existing host are refused before the fleet is asked, with what to do instead.
fn verbs_about_a_guest_without_one() -> Vec<Case> {
    let dependent = || write(GUEST_FILE, guest("depends_on: other.test", "nginx: {}"));
    let machine = || write(OTHER_FILE, domain_file("other.test", "cpus: 1"));
    let existing = || write(GUEST_FILE, guest("existing_host: 192.0.2.7", "nginx: {}"));
    let mut cases = Vec::new();
    for (verb, args, instead) in [
        (
            "snapshot",
            "snapshot example.test",
            "`trog snapshot other.test`",
        ),
        (
            "snapshot --list",
            "snapshot --list example.test",
            "`trog snapshot other.test`",
        ),
        (
            "restore",
            "restore --latest example.test",
            "`trog restore --latest other.test`",
        ),
        (
            "debug_boot",
            "debug_boot --console example.test",
            "`trog debug_boot --console other.test`",
        ),
        (
            "debug_boot --fetch",
            "debug_boot --fetch example.test",
            "`trog debug_boot --console other.test`",
        ),
    ] {
        cases.push(
            case(&format!("{verb} of a dependent"), args, CONFLICT)
                .edit(dependent())
                .edit(machine())
                .no_line()
                .says("has no guest of its own")
                .says(instead),
        );
        cases.push(
            case(&format!("{verb} of an existing host"), args, CONFLICT)
                .edit(existing())
                .no_line()
                .says("that trog did not build"),
        );
    }
    cases
}

/// Settings of addresses, tenants, mirrors, backups and the machine recipe, and verbs the other
/// groups do not reach (`inventory`, `assign_ip`, `image`, `root-programs`, `provision --all`).
fn more_settings_and_verbs() -> Vec<Case> {
    let setting = |name: &str, line: &str| {
        case(&format!("setting: {name}"), DRY, CONFIG).edit(write(GUEST_FILE, guest_with(line)))
    };
    vec![
        // Addresses and tenants.
        setting(
            "address_range ends before it starts",
            "address_range: 192.0.2.20-192.0.2.10/24\ngateway: 192.0.2.1",
        )
        .says("ends before it starts"),
        setting(
            "address_range across subnets",
            "address_range: 192.0.2.10-192.0.3.20/24\ngateway: 192.0.2.1",
        )
        .says("more than one /24"),
        setting(
            "address_range prefix 33",
            "address_range: 192.0.2.10-192.0.2.20/33\ngateway: 192.0.2.1",
        ),
        setting(
            "address_range with the broadcast address",
            "address_range: 192.0.2.0-192.0.2.255/24\ngateway: 192.0.2.1",
        )
        .says("broadcast"),
        setting(
            "address_range IPv6",
            "address_range: 2001:db8::1-2001:db8::9/64\ngateway: 2001:db8::ff",
        )
        .says("not an IPv4 address"),
        setting("tenant empty", "tenant: \"\""),
        setting("tenant upper case", "tenant: Shop"),
        setting(
            "tenant of 300 characters",
            &format!("tenant: {}", "t".repeat(300)),
        )
        .says("at most 64"),
        // Mirrors and caches.
        setting(
            "security_mirror ftp",
            "security_mirror: ftp://mirror.example.test/",
        ),
        setting(
            "fallback_mirrors without mirror",
            "fallback_mirrors: [http://a.example.test/debian]",
        )
        .says("`mirror` is set nowhere"),
        setting(
            "fallback_mirrors text",
            "fallback_mirrors: http://a.example.test/debian",
        )
        .says("expected a list"),
        setting(
            "fallback_security_mirrors without security_mirror",
            "fallback_security_mirrors: [http://b.example.test/debian-security]",
        ),
        setting("cache without a host", "cache: http://"),
        setting("cache with a space", "cache: \"http://a b\""),
        // Backups, the store, baked images.
        setting(
            "backup_retention_days negative",
            "backup_retention_days: -1",
        ),
        setting(
            "backup_retention_days past a century",
            "backup_retention_days: 36501",
        ),
        setting(
            "backup_retention_days a fraction",
            "backup_retention_days: 1.5",
        ),
        setting("backup_dir empty", "backup_dir: \"\""),
        setting("keepass_key_file empty", "keepass_key_file: \"\""),
        setting("bake_packages yes", "bake_packages: yes"),
        setting("bake_packages 1", "bake_packages: 1"),
        setting("baked_image_max_age_days 0", "baked_image_max_age_days: 0"),
        setting(
            "baked_image_max_age_days past ten years",
            "baked_image_max_age_days: 3651",
        ),
        // The network and the machine recipe's settings.
        setting("network empty", "network: \"\""),
        setting("bridge empty", "bridge: \"\""),
        setting("cpu_mode empty", "cpu_mode: \"\""),
        setting("firmware efi", "firmware: efi"),
        setting("disk_cache sometimes", "disk_cache: sometimes"),
        setting("disk_discard yes", "disk_discard: yes"),
        setting("data_mount relative", "data_mount: srv/data"),
        setting("timezone with a NUL", "timezone: \"Europe/Paris\\0x\"").says("control character"),
        setting("a package with a NUL", "packages: [\"vim\\0\"]"),
        // hypervisors.conf values at their bounds.
        case("hv: reserve_memory past u64", "fleet", CONFIG)
            .edit(write(HV, hv1("reserve_memory = 18446744073709551615T\n"))),
        case("hv: reserve_disk past any disk", "fleet", CONFIG)
            .edit(write(HV, hv1("reserve_disk = 999999999T\n"))),
        case("hv: max_guests in hex", "fleet", CONFIG).edit(write(HV, hv1("max_guests = 0x10\n"))),
        case("hv: partition /machine/ itself", "fleet", CONFIG)
            .edit(write(HV, hv1("partition = /machine/\n"))),
        case("hv: uri ssh port past u16", "fleet", CONFIG).edit(write(
            HV,
            "[hv1]\nlibvirt_uri = qemu+ssh://root@hv1.example.test:99999/system\n",
        )),
        // Verbs.
        case(
            "inventory, unknown --format",
            "inventory --format yaml",
            USAGE,
        )
        .no_hint(),
        case("inventory, no --known-hosts", "inventory", USAGE).says("--known-hosts FILE"),
        case(
            "inventory, a domain without a file",
            "inventory --format ansible nosuch.example.test",
            CONFIG,
        )
        .says("nosuch.example.test"),
        case(
            "inventory, --identity-file for two domains",
            "inventory --format ansible --identity-file {ROOT}/home/key example.test other.test",
            USAGE,
        ),
        case(
            "inventory, --known-hosts a file trog did not write",
            "inventory --known-hosts {ROOT}/home/known_hosts",
            CONFLICT,
        )
        .edit(write(
            "home/known_hosts",
            "github.com ssh-ed25519 AAAAtheirs\n",
        ))
        .no_line(),
        case(
            "assign_ip, --network empty",
            "assign_ip --network= example.test",
            USAGE,
        ),
        case(
            "assign_ip, --network bridge without a name",
            "assign_ip --network bridge: example.test",
            USAGE,
        ),
        case(
            "provision --all --parallel 0",
            "provision --all --parallel 0 --dry-run",
            USAGE,
        )
        .says("from 1 to 32"),
        case(
            "provision --parallel without --all",
            "provision --parallel 3 --dry-run example.test",
            USAGE,
        )
        .says("add --all"),
        case(
            "provision --all with a domain",
            "provision --all --dry-run example.test",
            USAGE,
        )
        .no_hint(),
        case(
            "image build --distro windows",
            "image build --distro windows",
            USAGE,
        ),
        case(
            "image build --mirror ftp",
            "image build --mirror ftp://x",
            USAGE,
        ),
        case(
            "image build --include with ;",
            "image build --include a;b",
            USAGE,
        ),
        case(
            "image build --overlay missing",
            "image build --overlay {ROOT}/nowhere",
            USAGE,
        ),
        case("image prune, extra argument", "image prune extra", USAGE).no_hint(),
        case(
            "root-programs sudoers --user with ;",
            "root-programs sudoers --user a;b",
            USAGE,
        )
        .says("not an account name"),
        case(
            "root-programs install-script --user empty",
            "root-programs install-script --user=",
            USAGE,
        ),
        case(
            "backup --sweep with --hypervisor",
            "backup --sweep --hypervisor hv1",
            USAGE,
        )
        .no_hint(),
        case("credentials: a byte order mark", DRY, CREDENTIALS)
            .input("\u{feff}keepass: x\n\n")
            .with_store(),
    ]
}

/// The guest's file with `disks` as its extra disks (a YAML flow list).
fn guest_with_disks(disks: &str) -> String {
    guest_with(&format!("disks: {disks}"))
}

/// A test-driver node holding the guest as trog built it, with its extra disk `db` of 2 GiB.
const NODE_WITH_A_DISK: &str = "<node><cpu><active>8</active></cpu><memory>16777216</memory>\
    <domain type='test'><name>example.test</name><memory unit='MiB'>512</memory><vcpu>1</vcpu><os><type>hvm</type></os>\
    <metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='example.test' boot='b' shape='s' payload=''/></metadata>\
    <devices><disk type='volume' device='disk'><source pool='trog' volume='example.test-disk-db.qcow2'/><target dev='vdc' bus='virtio'/></disk></devices></domain>\
    <pool type='dir'><name>trog</name><target><path>/vms</path></target>\
    <volume><name>example.test-disk-db.qcow2</name><capacity unit='G'>2</capacity></volume></pool></node>\n";

/// Extra disks (`disks:` of the vm recipe): every value wrong in each way, at its line.
fn extra_disks() -> Vec<Case> {
    let one = |name: &str, size: &str, mount: &str| {
        format!("[{{name: {name}, size: {size}, mount: {mount}}}]")
    };
    let two = |second: &str| format!("[{{name: db, size: 2G, mount: /srv/db}}, {second}]");
    let many = |count: usize, bus: &str| {
        let disks: Vec<String> = (0..count)
            .map(|index| format!("{{name: d{index}, size: 1G, mount: /srv/d{index}, bus: {bus}}}"))
            .collect();
        format!("[{}]", disks.join(", "))
    };
    let disks = |name: &str, list: &str| {
        case(&format!("disks: {name}"), DRY, CONFIG)
            .edit(write(GUEST_FILE, guest_with_disks(list)))
            .says("recipes.d/example.test.yaml:")
    };
    vec![
        // Sizes.
        disks("size 0", &one("db", "0", "/srv/db")).says("smaller"),
        disks("size in KiB", &one("db", "64K", "/srv/db")).says("smaller"),
        disks("size words", &one("db", "lots", "/srv/db")),
        disks("size negative", &one("db", "-2", "/srv/db")),
        disks("size a list", &one("db", "[2G]", "/srv/db")),
        disks("size too big", &one("db", "65T", "/srv/db")).says("at most"),
        disks("size missing", "[{name: db, mount: /srv/db}]"),
        case("disks: bigger than any hypervisor", DRY, NO_PLACEMENT)
            .edit(write(GUEST_FILE, guest_with_disks(&one("db", "60T", "/srv/db")))),
        // Names.
        disks("name twice", &two("{name: db, size: 1G, mount: /srv/other}")).says("declared twice"),
        disks("name upper case", &one("DB", "1G", "/srv/db")),
        disks("name too long", &one("abcdefghijk", "1G", "/srv/db")),
        disks("name with a slash", &one("\"../x\"", "1G", "/srv/db")),
        disks("name missing", "[{size: 1G, mount: /srv/db}]"),
        // Mount points.
        disks("mount point twice", &two("{name: logs, size: 1G, mount: /srv/db/}"))
            .says("mount point of disk db"),
        disks("mount point relative", &one("db", "1G", "srv/db")).says("absolute"),
        disks("mount point /", &one("db", "1G", "/")).says("own system"),
        disks("mount point /etc", &one("db", "1G", "/etc")).says("own system"),
        disks("mount point with ..", &one("db", "1G", "/srv/../usr")),
        disks("mount point with a space", &one("db", "1G", "\"/srv/my db\"")),
        disks("mount point missing", "[{name: db, size: 1G}]"),
        disks("mount point with a quote", &one("db", "1G", "'/srv/my\"db'"))
            .says("`/srv/my\"db` is not a plain path"),
        disks("mount point with a tab", &one("db", "1G", "\"/srv/a\\tb\""))
            .says("`/srv/a\\tb`"),
        case("disks: mount point of the data volume", DRY, CONFIG)
            .edit(write(
                GUEST_FILE,
                guest(
                    "cpus: 1\nsize: 4G\ndata_volume_size: 2G\ndisks: [{name: db, size: 1G, mount: /srv/data}]",
                    "nginx: {}",
                ),
            ))
            .says("data volume")
            .says("recipes.d/example.test.yaml:"),
        // Buses.
        disks("unknown bus", "[{name: db, size: 1G, mount: /srv/db, bus: sata}]"),
        disks("bus a number", "[{name: db, size: 1G, mount: /srv/db, bus: 3}]"),
        disks("too many on virtio", &many(25, "virtio")).says("room for 24"),
        disks("too many on scsi", &many(26, "scsi")).says("room for 25"),
        // The list itself.
        disks("a mapping", "{name: db, size: 1G, mount: /srv/db}"),
        disks("an unknown key", "[{name: db, size: 1G, mount: /srv/db, fs: xfs}]"),
        disks("an item that is text", "[db]"),
        // A built guest's disk of another size.
        case("disks: a built guest's disk shrunk", DRY, CONFLICT)
            .with_store()
            .credentials()
            .edit(write("node.xml", NODE_WITH_A_DISK))
            .edit(write(GUEST_FILE, guest_with_disks(&one("db", "1G", "/srv/db"))))
            .says("never shrunk")
            .says("recipes.d/example.test.yaml:"),
        case("disks: a built guest's disk grown", DRY, CONFLICT)
            .with_store()
            .credentials()
            .edit(write("node.xml", NODE_WITH_A_DISK))
            .edit(write(GUEST_FILE, guest_with_disks(&one("db", "4G", "/srv/db"))))
            .says("growing a disk is not supported")
            .says("declare 2GB"),
    ]
}

/// A test-driver node holding the guest as trog built it, with a data volume of 4 GiB.
const NODE_WITH_A_DATA_VOLUME: &str = "<node><cpu><active>8</active></cpu><memory>16777216</memory>\
    <domain type='test'><name>example.test</name><memory unit='MiB'>512</memory><vcpu>1</vcpu><os><type>hvm</type></os>\
    <metadata><trog:guest xmlns:trog='urn:x-trog:guest:1' owner='trog' domain='example.test' boot='b' shape='s' payload=''/></metadata>\
    <devices><disk type='volume' device='disk'><source pool='trog' volume='example.test-data.qcow2'/><target dev='vdb' bus='virtio'/></disk></devices></domain>\
    <pool type='dir'><name>trog</name><target><path>/vms</path></target>\
    <volume><name>example.test-data.qcow2</name><capacity unit='G'>4</capacity></volume></pool></node>\n";

/// Places a system needs for itself (the guest's, for a data volume or shared folder mounted
/// over them; the hypervisor's, for a pool), addresses a guest cannot have, users trog makes
/// itself or no one logs in as, and a built guest's data volume declared smaller than it is.
fn places_addresses_users_and_volumes() -> Vec<Case> {
    let setting = |name: &str, line: &str| {
        case(&format!("setting: {name}"), DRY, CONFIG).edit(write(GUEST_FILE, guest_with(line)))
    };
    vec![
        // Where the data volume and shared folders are mounted.
        setting("data_mount /etc", "data_volume_size: 2G\ndata_mount: /etc")
            .says("`_global.data_mount`")
            .says("own system"),
        setting("data_mount / without a data volume", "data_mount: /").says("own system"),
        setting(
            "data_mount /var/ written with a slash",
            "data_volume_size: 2G\ndata_mount: /var/",
        )
        .says("/var is the guest's own system"),
        setting(
            "data_mount through ..",
            "data_volume_size: 2G\ndata_mount: /srv/../boot",
        )
        .says("`..`"),
        case("data_mount /usr in _base", DRY, CONFIG)
            .edit(write(RECIPES, base_with("data_mount: /usr")))
            .says("recipes.yaml:")
            .says("own system"),
        setting(
            "shared folder over /lib32",
            "shared_folders: [{name: libs, source: /srv/libs, mount: /lib32}]",
        )
        .says("the guest's system needs"),
        // A guest's fixed addresses and its gateway.
        setting(
            "ips the same address twice",
            "ips: [192.0.2.5/24, 192.0.2.5/24]",
        )
        .says("`_global.ips[1]`")
        .says("twice"),
        setting(
            "ips the same address under two prefixes",
            "ips: [192.0.2.5/24, 10.0.0.5/8, 192.0.2.5/25]",
        )
        .says("`_global.ips[2]`")
        .says("twice"),
        setting("ips the subnet's own address", "ips: [192.0.2.0/24]")
            .says("the address of the subnet"),
        setting(
            "ips the broadcast address",
            "ips: [192.0.2.5/24, 192.0.2.255/24]",
        )
        .says("`_global.ips[1]`")
        .says("broadcast"),
        setting(
            "gateway one of the guest's own addresses",
            "ips: [192.0.2.5/24]\ngateway: 192.0.2.5",
        )
        .says("`_global.ips[0]`")
        .says("is the guest's `gateway` too (")
        .says("example.test.yaml:6:"),
        case(
            "gateway of _base one of the guest's own addresses",
            DRY,
            CONFIG,
        )
        .edit(write(RECIPES, base_with("gateway: 192.0.2.1")))
        .edit(write(GUEST_FILE, guest_with("ips: [192.0.2.1/24]")))
        .at(GUEST_FILE)
        .says("`_global.ips[0]`")
        .says("recipes.yaml:"),
        setting(
            "gateway the guest's own IPv6 address",
            "ips: [192.0.2.5/24, 2001:db8::5/64]\ngateway: 2001:db8::5",
        )
        .says("`_global.ips[1]`")
        .says("`gateway` too"),
        // users.yaml: users trog makes itself, or that no login may be.
        case("users.yaml names root", DRY, CONFIG)
            .edit(write(USERS, "- name: alice\n- name: root\n"))
            .says("users.yaml:2:")
            .says("root"),
        case("users.yaml names the admin_user", DRY, CONFIG)
            .edit(write(USERS, "- name: siteadmin\n  groups: [www-data]\n"))
            .says("users.yaml:1:")
            .says("admin_user"),
        // hypervisors.conf: a pool over the hypervisor's own system.
        case("hv: pool_path /", "fleet", CONFIG)
            .edit(write(HV, hv1("pool_path = /\n")))
            .says("`/` is a directory of the hypervisor's own system"),
        case("hv: pool_path /etc/", "fleet", CONFIG)
            .edit(write(HV, hv1("pool_path = /etc/\n")))
            .says("/etc"),
        case("hv: pool_path /usr in a second block", DRY, CONFIG)
            .edit(write(
                HV,
                format!(
                    "{}[hv2]\nlibvirt_uri = test:///default\npool_path = /usr\n",
                    hv1("")
                ),
            ))
            .says("[hv2]"),
        // A built guest's data volume declared smaller than it is.
        case("data volume of a built guest shrunk", DRY, CONFLICT)
            .with_store()
            .credentials()
            .edit(write("node.xml", NODE_WITH_A_DATA_VOLUME))
            .edit(write(GUEST_FILE, guest_with("data_volume_size: 2G")))
            .says("holds 4GB but 2GB is declared")
            .says("recipes.d/example.test.yaml:")
            .says("never shrunk"),
        case("data volume of a built guest shrunk, in MiB", DRY, CONFLICT)
            .with_store()
            .credentials()
            .edit(write("node.xml", NODE_WITH_A_DATA_VOLUME))
            .edit(write(GUEST_FILE, guest_with("data_volume_size: 3584M")))
            .says("holds 4GB but 3584MB is declared")
            .says("data_volume_size: 4G"),
    ]
}

#[test]
fn every_bad_input_is_refused_cleanly() {
    let cases: Vec<Case> = [
        names_and_arguments(),
        guest_files(),
        installation_files(),
        fleet_files(),
        credentials_and_store(),
        every_file_at_its_line(),
        more_arguments(),
        more_credentials(),
        refused_while_parsing(),
        setting_values(),
        sites(),
        extra_disks(),
        more_settings_and_verbs(),
        places_addresses_users_and_volumes(),
    ]
    .concat();
    let mut names: Vec<&str> = cases.iter().map(|case| case.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "two cases have one name");
    assert!(cases.len() > 250, "the corpus has {} cases", cases.len());
    // Cases are independent (each its own temporary root): two at a time keeps a 2-core machine
    // shared with other work responsive.
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(case) = cases.get(index) else { break };
                if let Err(why) = run(case) {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{}: {why}", case.name));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs were not refused cleanly:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn debug_text_is_recognised() {
    assert!(debug_text("error: Some(\"x\")").is_some());
    assert!(debug_text("Caused by: Os { code: 2, kind: NotFound }").is_some());
    assert!(debug_text("error: Origin { file: x, line: 1 }").is_some());
    assert!(debug_text("error: a.yaml: error: line 1 column 1: x\n --> <input>:1:1").is_some());
    assert!(debug_text("error: x\n --> <input>:1:1").is_some());
    assert!(debug_text("error: a.yaml:1:1: x\nCaused by: y").is_none());
    assert!(debug_text("hint: write it as `{}` or `key: value`").is_none());
}

#[test]
fn a_line_is_recognised() {
    assert!(points_at_line("error: /t/etc/a.yaml:3:1: x", "etc/a.yaml"));
    assert!(!points_at_line("error: /t/etc/a.yaml: x", "etc/a.yaml"));
    assert!(!points_at_line(
        "error: /t/etc/a.yaml.bak:3: x",
        "etc/a.yaml"
    ));
}
