//! Op names and tool names.
//!
//! An op name is lowercase dotted `plane.verb`
//! (`[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+`). When `#[loom_op]` names none, the
//! name is derived from where the handler lives: the last segment of its
//! module path, a dot, and the function name (`fn get` in `mod memory` →
//! `memory.get`). Both rules are `const fn`s so that the attribute's expansion
//! checks them at compile time, on the op author's tokens.

/// The prefix of every MCP tool name.
pub const TOOL_PREFIX: &str = "loom_";

const fn is_segment_start(b: u8) -> bool {
    b.is_ascii_lowercase()
}

const fn is_segment_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

/// Whether `s` is one lowercase identifier segment (`[a-z][a-z0-9_]*`).
pub const fn is_valid_segment(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !is_segment_start(b[0]) {
        return false;
    }
    let mut i = 1;
    while i < b.len() {
        if !is_segment_byte(b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `s` is a valid op name: two or more dot-separated segments.
pub const fn is_valid_op_name(s: &str) -> bool {
    let b = s.as_bytes();
    let mut dots = 0;
    let mut at_start = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if at_start {
            if !is_segment_start(c) {
                return false;
            }
            at_start = false;
        } else if c == b'.' {
            dots += 1;
            at_start = true;
        } else if !is_segment_byte(c) {
            return false;
        }
        i += 1;
    }
    dots > 0 && !at_start
}

/// The last `::` segment of a module path, or `None` at a crate root.
pub const fn plane_of_module_path(module_path: &str) -> Option<&str> {
    let b = module_path.as_bytes();
    let mut i = b.len();
    while i >= 2 {
        if b[i - 1] == b':' && b[i - 2] == b':' {
            let (_, tail) = b.split_at(i);
            return match core::str::from_utf8(tail) {
                Ok(s) => Some(s),
                Err(_) => None,
            };
        }
        i -= 1;
    }
    None
}

/// Compile-time check of an explicit `name = "…"`.
pub const fn check_op_name(name: &str) {
    if !is_valid_op_name(name) {
        panic!(
            "`#[loom_op]` name must be lowercase dotted `plane.verb`, matching [a-z][a-z0-9_]*(.[a-z][a-z0-9_]*)+"
        );
    }
}

/// Compile-time check that a name can be derived from `module_path` and the
/// handler's name.
pub const fn check_derived_name(module_path: &str, handler: &str) {
    let Some(plane) = plane_of_module_path(module_path) else {
        panic!(
            "`#[loom_op]` cannot derive an op name for a handler at a crate root: move it into its plane's module (`mod memory`) or give `name = \"plane.verb\"`"
        );
    };
    if !is_valid_segment(plane) || !is_valid_segment(handler) {
        panic!(
            "`#[loom_op]` cannot derive an op name: the module and the handler must both be lowercase [a-z][a-z0-9_]*; give `name = \"plane.verb\"`"
        );
    }
}

/// The derived op name, `plane.verb`. `None` where [`check_derived_name`] would panic.
pub fn derive_op_name(module_path: &str, handler: &str) -> Option<String> {
    let plane = plane_of_module_path(module_path)?;
    let name = format!("{plane}.{handler}");
    is_valid_op_name(&name).then_some(name)
}

/// `memory.set` → `loom_memory_set`.
pub fn tool_name(op_name: &str) -> String {
    let mut s = String::with_capacity(TOOL_PREFIX.len() + op_name.len());
    s.push_str(TOOL_PREFIX);
    s.extend(op_name.chars().map(|c| if c == '.' { '_' } else { c }));
    s
}

/// The verb of an op name: its last segment (`memory.apply` → `apply`).
pub fn verb_of(op_name: &str) -> &str {
    op_name.rsplit('.').next().unwrap_or(op_name)
}

/// The plane of an op name: its first segment (`memory.apply` → `memory`).
pub fn plane_of(op_name: &str) -> &str {
    op_name.split('.').next().unwrap_or(op_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names() {
        for n in [
            "memory.get",
            "working_memory.set",
            "a.b.c",
            "x1.y_2",
            "ops.capabilities",
        ] {
            assert!(is_valid_op_name(n), "{n}");
        }
    }

    #[test]
    fn invalid_names() {
        for n in [
            "",
            "memory",
            "Memory.get",
            "memory.",
            ".get",
            "memory..get",
            "memory.Get",
            "1a.b",
            "memory.get ",
            "memory-get.x",
            "memory._x",
            "_m.get",
            "memory.gét",
        ] {
            assert!(!is_valid_op_name(n), "{n:?}");
        }
    }

    #[test]
    fn derives_from_the_last_module_segment() {
        assert_eq!(
            derive_op_name("loom_ops::memory", "get").as_deref(),
            Some("memory.get")
        );
        assert_eq!(
            derive_op_name("loom_ops::planes::working_memory", "set").as_deref(),
            Some("working_memory.set")
        );
        assert_eq!(derive_op_name("loom_ops", "get"), None);
        assert_eq!(derive_op_name("loom_ops::Memory", "get"), None);
        assert_eq!(derive_op_name("loom_ops::memory", "Get"), None);
    }

    #[test]
    fn plane_of_module_path_takes_the_last_segment() {
        assert_eq!(plane_of_module_path("a::b::c"), Some("c"));
        assert_eq!(plane_of_module_path("a"), None);
    }

    #[test]
    fn tool_names_replace_dots() {
        assert_eq!(tool_name("memory.set"), "loom_memory_set");
        assert_eq!(
            tool_name("working_memory.append"),
            "loom_working_memory_append"
        );
        assert_eq!(verb_of("memory.apply"), "apply");
        assert_eq!(plane_of("memory.apply"), "memory");
    }
}
