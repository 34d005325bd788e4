//! Build-time checks of the PHP the extension is built against (feature `php`
//! only: `cargo test --no-default-features` needs no PHP at all).
//!
//! - `php` and `php-config` must be found (ext-php-rs reads both): say how to
//!   get them, instead of a bindgen or linker error further down.
//! - NTS and ZTS (thread-safe) PHP both build (ext-php-rs reads which from
//!   `php -i`). The core must never reach the Zend engine: its watchdog thread is
//!   no PHP thread, and under ZTS a Zend call from it crashes. So no file under
//!   src/core/ may name `ext_php_rs` or `crate::php`.
//! - On macOS, an extension leaves PHP's own symbols undefined until PHP loads
//!   it: the linker must be told so (ext-php-rs leaves that to a hand-made
//!   .cargo/config otherwise).
//! - The Lua scripts (always): every file in src/core/scripts/ is compiled in
//!   (an orphan is a script someone forgot to wire up), none calls a command that
//!   walks the keyspace (KEYS, SCAN: unbounded, and wrong on a Redis Cluster),
//!   and each starts with the comment that declares its KEYS and ARGV.

use std::env;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use ext_php_rs_build::{find_executable, find_php};

const HOW_TO_GET_PHP: &str = "install PHP's development files (Debian/Ubuntu: apt-get install \
     php8.2-dev; macOS: brew install php), or point the PHP and PHP_CONFIG environment \
     variables at the php binary and the php-config script of the PHP to build for";

fn main() -> Result<()> {
    check_scripts()?;
    check_core_is_pure()?;
    println!("cargo::rerun-if-env-changed=PHP");
    println!("cargo::rerun-if-env-changed=PHP_CONFIG");
    if env::var_os("CARGO_FEATURE_PHP").is_none() {
        return Ok(());
    }

    find_php().context(format!(
        "redis_lease: no php executable found; {HOW_TO_GET_PHP}"
    ))?;
    let php_config = match env::var_os("PHP_CONFIG") {
        Some(path) => PathBuf::from(path),
        None => find_executable("php-config").context(format!(
            "redis_lease: no php-config found (it comes with PHP's development files); {HOW_TO_GET_PHP}"
        ))?,
    };
    let runs = Command::new(&php_config)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        bail!(
            "redis_lease: {} does not run; {HOW_TO_GET_PHP}",
            php_config.display()
        );
    }

    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo::rustc-cdylib-link-arg=-undefined");
        println!("cargo::rustc-cdylib-link-arg=dynamic_lookup");
    }
    Ok(())
}

/// See the module comment: the core (and so the watchdog) has no way into PHP.
fn check_core_is_pure() -> Result<()> {
    let mut dirs = vec![PathBuf::from("src/core")];
    println!("cargo::rerun-if-changed=src/core");
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            for name in ["ext_php_rs", "crate::php"] {
                if text.contains(name) {
                    bail!(
                        "{} names {name}: the core must not reach PHP (its watchdog thread is no \
                         PHP thread; under ZTS a Zend call from it crashes)",
                        path.display()
                    );
                }
            }
        }
    }
    Ok(())
}

/// See the module comment.
fn check_scripts() -> Result<()> {
    let dir = PathBuf::from("src/core/scripts");
    println!("cargo::rerun-if-changed={}", dir.display());
    println!("cargo::rerun-if-changed=src/core/scripts.rs");
    let wired =
        std::fs::read_to_string("src/core/scripts.rs").context("reading src/core/scripts.rs")?;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".lua") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if name != "lib.lua" && !wired.contains(&format!("\"{name}\"")) {
            bail!("src/core/scripts/{name} is not compiled in: add it to src/core/scripts.rs");
        }
        if !text.starts_with("--") {
            bail!(
                "src/core/scripts/{name} must start with a comment that declares its KEYS and ARGV"
            );
        }
        for walk in ["'KEYS'", "'SCAN'", "\"KEYS\"", "\"SCAN\""] {
            if text.contains(&format!("redis.call({walk}"))
                || text.contains(&format!("redis.pcall({walk}"))
            {
                bail!("src/core/scripts/{name} calls {walk}: scripts must touch only the keys they declare");
            }
        }
    }
    Ok(())
}
