//! The site's dependency graph: which domain runs on which machine (`depends_on`), the order the
//! domains are converged in (a machine before what runs on it), and the refusals (a domain
//! depended on that has no file, a cycle), each pointing at the `depends_on` line. Pure: the
//! domains and what they say come in, the graph or the problems go out.

use crate::config::yaml::Origin;
use crate::diagnose::Diagnose;
use crate::exit_status::ExitStatus;
use crate::model::names::DomainName;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// One domain as the graph sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainNode {
    pub domain: DomainName,
    /// The domain whose machine it runs on, and where that was written.
    pub depends_on: Option<(DomainName, Option<Origin>)>,
}

/// The domains in the order they are converged, each with the machine it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteGraph {
    /// Every domain after the one it depends on; otherwise in the order given.
    pub order: Vec<DomainName>,
    /// The domain each depends on directly.
    pub depends_on: HashMap<DomainName, DomainName>,
}

impl SiteGraph {
    /// The domain whose machine `domain` runs on: itself, or the end of its `depends_on` chain.
    pub fn machine_of<'a>(&'a self, domain: &'a DomainName) -> &'a DomainName {
        let mut current = domain;
        while let Some(next) = self.depends_on.get(current) {
            current = next;
        }
        current
    }

    /// The domains `domain` depends on, nearest first.
    pub fn dependencies_of(&self, domain: &DomainName) -> Vec<DomainName> {
        let mut chain = Vec::new();
        let mut current = domain;
        while let Some(next) = self.depends_on.get(current) {
            chain.push(next.clone());
            current = next;
        }
        chain
    }
}

/// A `depends_on` that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependencyProblem {
    /// It names a domain recipes.d has no file for.
    NoSuchDomain {
        domain: DomainName,
        wanted: DomainName,
        written_at: Option<Origin>,
        suggestion: Option<DomainName>,
    },
    /// The domains depend on each other in a ring: each on the next, the last on the first.
    Cycle {
        ring: Vec<(DomainName, Option<Origin>)>,
    },
}

impl fmt::Display for DependencyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DependencyProblem::NoSuchDomain {
                domain,
                wanted,
                written_at,
                suggestion,
            } => {
                if let Some(origin) = written_at {
                    write!(f, "{origin}: ")?;
                }
                write!(
                    f,
                    "{domain} depends on {wanted}, which has no file in recipes.d"
                )?;
                if let Some(suggestion) = suggestion {
                    write!(f, " (did you mean {suggestion}?)")?;
                }
                Ok(())
            }
            DependencyProblem::Cycle { ring } => {
                let (first, origin) = &ring[0];
                if let Some(origin) = origin {
                    write!(f, "{origin}: ")?;
                }
                write!(f, "a cycle: {first}")?;
                for (domain, _) in ring.iter().skip(1) {
                    write!(f, " depends on {domain}, which")?;
                }
                write!(f, " depends on {first}")?;
                for (domain, origin) in ring.iter().skip(1) {
                    if let Some(origin) = origin {
                        write!(f, "\n    {domain}'s depends_on is at {origin}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Every `depends_on` of the site that cannot be followed, refused before anything is asked of
/// any machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the site's dependencies cannot be followed:{}", problem_lines(.problems))]
pub struct DependencyError {
    pub problems: Vec<DependencyProblem>,
}

fn problem_lines(problems: &[DependencyProblem]) -> String {
    problems
        .iter()
        .map(|problem| format!("\n  {problem}"))
        .collect()
}

impl Diagnose for DependencyError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::Configuration
    }

    fn hint(&self) -> Option<String> {
        Some("`depends_on` names the domain of recipes.d whose machine this one runs on: a domain with a machine of its own (a guest trog builds, or an `existing_host`), or one that depends on such a domain; correct or remove the line named above".into())
    }
}

/// The graph of `nodes`; `known` is every domain recipes.d has a file for (a node may depend on
/// one that is not among `nodes`, whose configuration could not be read: its failure is then
/// its dependents' too, which the caller decides).
pub fn site_graph(
    nodes: &[DomainNode],
    known: &[DomainName],
) -> Result<SiteGraph, DependencyError> {
    let mut problems = Vec::new();
    let mut depends_on = HashMap::new();
    for node in nodes {
        let Some((wanted, written_at)) = &node.depends_on else {
            continue;
        };
        if !known.contains(wanted) {
            let suggestion = crate::did_you_mean::nearest(
                wanted.as_str(),
                known.iter().map(DomainName::as_str),
                |word| (word.chars().count() / 3).max(1),
            )
            .and_then(|name| DomainName::parse(name).ok());
            problems.push(DependencyProblem::NoSuchDomain {
                domain: node.domain.clone(),
                wanted: wanted.clone(),
                written_at: written_at.clone(),
                suggestion,
            });
            continue;
        }
        depends_on.insert(node.domain.clone(), wanted.clone());
    }

    // A machine before what runs on it; of those ready, always the first in the order given.
    let mut order: Vec<DomainName> = Vec::new();
    let mut placed: HashSet<&DomainName> = HashSet::new();
    let in_nodes: HashSet<&DomainName> = nodes.iter().map(|node| &node.domain).collect();
    while let Some(node) = nodes.iter().find(|node| {
        !placed.contains(&node.domain)
            && match depends_on.get(&node.domain) {
                None => true,
                // One whose configuration was not read is not converged by this run: nothing
                // waits for it here.
                Some(wanted) => placed.contains(wanted) || !in_nodes.contains(wanted),
            }
    }) {
        placed.insert(&node.domain);
        order.push(node.domain.clone());
    }

    // What is left waits on a ring, or is in one: each ring is named once, from its first
    // domain in the order given.
    let origin_of = |domain: &DomainName| {
        nodes
            .iter()
            .find(|node| &node.domain == domain)
            .and_then(|node| node.depends_on.as_ref())
            .and_then(|(_, origin)| origin.clone())
    };
    let mut in_a_ring: HashSet<DomainName> = HashSet::new();
    for node in nodes {
        if placed.contains(&node.domain) || in_a_ring.contains(&node.domain) {
            continue;
        }
        let mut path: Vec<&DomainName> = vec![&node.domain];
        let mut current = &node.domain;
        while let Some(next) = depends_on.get(current) {
            if let Some(start) = path.iter().position(|seen| *seen == next) {
                let ring: Vec<&DomainName> = path[start..].to_vec();
                if ring.iter().all(|domain| !in_a_ring.contains(*domain)) {
                    problems.push(DependencyProblem::Cycle {
                        ring: ring
                            .iter()
                            .map(|domain| ((*domain).clone(), origin_of(domain)))
                            .collect(),
                    });
                    in_a_ring.extend(ring.into_iter().cloned());
                }
                break;
            }
            if in_a_ring.contains(next) {
                break;
            }
            path.push(next);
            current = next;
        }
    }
    if !problems.is_empty() {
        return Err(DependencyError { problems });
    }
    Ok(SiteGraph { order, depends_on })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;

    fn name(text: &str) -> DomainName {
        DomainName::parse(text).unwrap()
    }

    fn at(file: &str, line: u32) -> Option<Origin> {
        Some(Origin {
            file: Arc::from(Path::new(file)),
            line,
            column: 5,
        })
    }

    /// `(domain, depends_on)`, the line of each `depends_on` being 3 in the domain's file.
    fn nodes(site: &[(&str, Option<&str>)]) -> Vec<DomainNode> {
        site.iter()
            .map(|(domain, wanted)| DomainNode {
                domain: name(domain),
                depends_on: wanted
                    .map(|wanted| (name(wanted), at(&format!("recipes.d/{domain}.yaml"), 3))),
            })
            .collect()
    }

    fn known(site: &[(&str, Option<&str>)]) -> Vec<DomainName> {
        site.iter().map(|(domain, _)| name(domain)).collect()
    }

    fn order(graph: &SiteGraph) -> Vec<&str> {
        graph.order.iter().map(DomainName::as_str).collect()
    }

    #[test]
    fn a_machine_comes_before_every_domain_that_runs_on_it_and_the_rest_keep_their_order() {
        let site = [
            ("blog.test", Some("web.test")),
            ("db.test", None),
            ("shop.test", Some("blog.test")),
            ("web.test", None),
            ("wiki.test", Some("web.test")),
        ];
        let graph = site_graph(&nodes(&site), &known(&site)).unwrap();
        assert_eq!(
            order(&graph),
            ["db.test", "web.test", "blog.test", "shop.test", "wiki.test"]
        );
        assert_eq!(graph.machine_of(&name("shop.test")).as_str(), "web.test");
        assert_eq!(graph.machine_of(&name("db.test")).as_str(), "db.test");
        assert_eq!(
            graph.dependencies_of(&name("shop.test")),
            [name("blog.test"), name("web.test")]
        );
    }

    #[test]
    fn a_dependency_without_a_file_is_named_at_its_line_with_the_nearest_name() {
        let site = [("blog.test", Some("wbe.test")), ("web.test", None)];
        let error = site_graph(&nodes(&site), &known(&site)).unwrap_err();
        assert_eq!(
            error.problems[0].to_string(),
            "recipes.d/blog.test.yaml:3:5: blog.test depends on wbe.test, which has no file in recipes.d (did you mean web.test?)"
        );
        assert_eq!(error.exit_status(), ExitStatus::Configuration);
    }

    #[test]
    fn a_cycle_is_named_once_with_every_line_and_its_dependents_are_not_ordered() {
        let site = [
            ("a.test", Some("b.test")),
            ("b.test", Some("c.test")),
            ("c.test", Some("a.test")),
            ("d.test", Some("b.test")),
            ("e.test", None),
        ];
        let error = site_graph(&nodes(&site), &known(&site)).unwrap_err();
        assert_eq!(error.problems.len(), 1, "{error}");
        assert_eq!(
            error.problems[0].to_string(),
            "recipes.d/a.test.yaml:3:5: a cycle: a.test depends on b.test, which depends on c.test, which depends on a.test\n    \
             b.test's depends_on is at recipes.d/b.test.yaml:3:5\n    \
             c.test's depends_on is at recipes.d/c.test.yaml:3:5"
        );
    }

    #[test]
    fn a_domain_depending_on_itself_is_a_cycle() {
        let site = [("a.test", Some("a.test"))];
        let error = site_graph(&nodes(&site), &known(&site)).unwrap_err();
        assert_eq!(
            error.problems[0].to_string(),
            "recipes.d/a.test.yaml:3:5: a cycle: a.test depends on a.test"
        );
    }

    #[test]
    fn a_dependency_whose_configuration_was_not_read_does_not_hold_its_dependents_back() {
        let all = [("blog.test", Some("web.test")), ("web.test", None)];
        let read = [("blog.test", Some("web.test"))];
        let graph = site_graph(&nodes(&read), &known(&all)).unwrap();
        assert_eq!(order(&graph), ["blog.test"]);
        assert_eq!(graph.machine_of(&name("blog.test")).as_str(), "web.test");
    }
}
