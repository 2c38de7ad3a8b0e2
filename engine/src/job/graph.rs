//! The logical job graph (P sources, an optional `keyBy`, M window operators, one sink) and
//! how it runs: chained into one task, or as a graph of tasks joined by channels.
//!
//! The rule is Flink's operator chaining: two operators joined by a forward edge (no
//! repartitioning) of equal parallelism run in one task, one after the other, with no
//! channel, no barrier alignment and no scheduler choice between them; a `keyBy` is a hash
//! edge and is never chained. keel's graph therefore chains exactly when it has one source,
//! one window operator and events without keys (a non-keyed window over the whole stream,
//! Flink's `windowAll`): source, window and sink form one task, and that task is the
//! chapter's engine (`crate::engine::Engine`): it checkpoints every K source events, as the
//! chapter does, since a coordinator with one task to ask has nothing to align. Any other
//! graph runs as tasks ([`crate::job::Job`]) under a seeded scheduler.
//!
//! Architecture invariant: which engine runs a job is decided here, from the graph, and
//! nowhere else; the command line never picks an engine by the name of a command.

use std::fmt;

/// The shape of a job: what decides whether it chains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobGraph {
    /// P: source partitions.
    pub sources: u32,
    /// M: parallel window operators.
    pub parallelism: u32,
    /// Whether any event carries a key: the graph then has a `keyBy` (a hash edge).
    pub keyed: bool,
    /// Whether operators may chain (Flink's `disableOperatorChaining()` turns it off).
    pub chaining: bool,
}

/// How a job graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// One task: source, window and sink chained; the chapter's engine.
    Chained,
    /// Tasks joined by channels: P sources, M operators and the sink, under a scheduler.
    Tasks { tasks: u32 },
}

impl JobGraph {
    /// How this graph runs (see the module docs for the rule).
    pub fn execution(&self) -> Execution {
        assert!(self.sources >= 1);
        assert!(self.parallelism >= 1);
        if self.chaining && self.sources == 1 && self.parallelism == 1 && !self.keyed {
            Execution::Chained
        } else {
            Execution::Tasks {
                tasks: self.sources + self.parallelism + 1,
            }
        }
    }

    /// Why this graph is not chained, when it is not.
    pub fn unchained_because(&self) -> Option<&'static str> {
        if self.execution() == Execution::Chained {
            None
        } else if !self.chaining {
            Some("chaining is disabled")
        } else if self.keyed {
            Some("its events carry keys: keyBy is a hash edge, never chained")
        } else {
            Some("it has more than one source or operator")
        }
    }
}

impl fmt::Display for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Execution::Chained => f.write_str("one chained task (source, window, sink)"),
            Execution::Tasks { tasks } => write!(f, "{tasks} tasks joined by channels"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sources: u32, parallelism: u32, keyed: bool, chaining: bool, expected: Execution) {
        let graph = JobGraph {
            sources,
            parallelism,
            keyed,
            chaining,
        };
        assert_eq!(graph.execution(), expected, "{graph:?}");
        assert_eq!(
            graph.unchained_because().is_none(),
            expected == Execution::Chained,
            "{graph:?}"
        );
    }

    #[test]
    fn only_one_source_one_operator_and_no_keys_chain() {
        check(1, 1, false, true, Execution::Chained);
        check(1, 1, false, false, Execution::Tasks { tasks: 3 });
        check(1, 1, true, true, Execution::Tasks { tasks: 3 });
        check(2, 1, false, true, Execution::Tasks { tasks: 4 });
        check(1, 4, false, true, Execution::Tasks { tasks: 6 });
        check(2, 4, true, true, Execution::Tasks { tasks: 7 });
    }
}
