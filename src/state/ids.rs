//! Identifiers derived from content (resource, project, effect ids, token hashes) and the random
//! ones (UUIDs, claim tokens).

use base64::Engine;
use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn sha256_hex_prefix(text: &str) -> String {
    let mut hex = hex::encode(sha256(text.as_bytes()));
    hex.truncate(40);
    hex
}

/// `${type}-${sha256(`${type}\0${aggregateKey}`).hex.slice(0, 40)}`
pub fn resource_id_for(resource_type: &str, aggregate_key: &str) -> String {
    let digest = sha256_hex_prefix(&format!("{resource_type}\0{aggregate_key}"));
    format!("{resource_type}-{digest}")
}

/// `project-` + the first 40 hex digits of the SHA-256 of the canonical project path.
pub fn project_id_for(canonical_path: &str) -> String {
    format!("project-{}", sha256_hex_prefix(canonical_path))
}

/// `effect-` + the first 40 hex digits of SHA-256(`<source resource id>\0<key>`).
pub fn effect_id_for(source_resource_id: &str, key: &str) -> String {
    format!(
        "effect-{}",
        sha256_hex_prefix(&format!("{source_resource_id}\0{key}"))
    )
}

/// A random v4 UUID (`crypto.randomUUID()`).
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `randomBytes(32).toString("base64url")`: 43 characters, no padding.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system provides randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_have_the_reference_shapes() {
        assert_eq!(random_token().len(), 43);
        assert_eq!(random_uuid().len(), 36);
        assert!(resource_id_for("run", "r").starts_with("run-"));
        assert_eq!(resource_id_for("run", "r").len(), 44);
    }
}
