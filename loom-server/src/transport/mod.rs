//! The transports: HTTP (`/v1`) and MCP (`/mcp`).

pub mod mcp;
