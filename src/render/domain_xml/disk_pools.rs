//! The storage pools a domain's definition takes its disks from (`<source pool=… volume=…>`):
//! what the planner compares with the pool its hypervisor's `pool_name` names now. The libvirt
//! backend and the fake read a definition the same way.

/// The pools of `domain_xml`'s disks, each once, sorted; none for a definition that does not
/// parse or whose disks are files.
pub fn disk_pools(domain_xml: &str) -> Vec<String> {
    let Ok(document) = roxmltree::Document::parse(domain_xml) else {
        return Vec::new();
    };
    let pools: std::collections::BTreeSet<String> = document
        .descendants()
        .filter(|node| node.has_tag_name("disk"))
        .filter_map(|disk| disk.children().find(|node| node.has_tag_name("source")))
        .filter_map(|source| source.attribute("pool").map(str::to_string))
        .collect();
    pools.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pools_of_a_definitions_disks_each_once() {
        let xml = "<domain><devices>\
            <disk type='volume' device='disk'><source pool='trog' volume='a-root.qcow2'/></disk>\
            <disk type='volume' device='disk'><source pool='trog' volume='a-data.qcow2'/></disk>\
            <disk type='volume' device='disk'><source pool='fast' volume='a-disk-pg.qcow2'/></disk>\
            <disk type='file' device='cdrom'><source file='/var/lib/x.iso'/></disk>\
            <filesystem><source dir='/srv/media'/></filesystem>\
            </devices></domain>";
        assert_eq!(disk_pools(xml), ["fast", "trog"]);
        assert_eq!(disk_pools("<domain/>"), Vec::<String>::new());
        assert_eq!(disk_pools("not xml"), Vec::<String>::new());
    }
}
