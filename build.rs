//! Build-time checks of the PHP the extension is built against (feature `php`
//! only: `cargo test --no-default-features` needs no PHP at all).
//!
//! - `php` and `php-config` must be found (ext-php-rs reads both): say how to
//!   get them, instead of a bindgen or linker error further down.
//! - A ZTS (thread-safe) PHP is refused until a ZTS build has passed the test
//!   suite: the code keeps each request's state per thread, but no ZTS PHP has
//!   ever run it.
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
use ext_php_rs_build::{find_executable, find_php, PHPInfo};

const HOW_TO_GET_PHP: &str = "install PHP's development files (Debian/Ubuntu: apt-get install \
     php8.2-dev; macOS: brew install php), or point the PHP and PHP_CONFIG environment \
     variables at the php binary and the php-config script of the PHP to build for";

fn main() -> Result<()> {
    check_scripts()?;
    println!("cargo::rerun-if-env-changed=PHP");
    println!("cargo::rerun-if-env-changed=PHP_CONFIG");
    println!("cargo::rerun-if-env-changed=REDIS_LEASE_ALLOW_ZTS");
    if env::var_os("CARGO_FEATURE_PHP").is_none() {
        return Ok(());
    }

    let php = find_php().context(format!(
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

    let info = PHPInfo::get(&php)
        .with_context(|| format!("redis_lease: cannot ask {} about itself", php.display()))?;
    if info.thread_safety()? && env::var_os("REDIS_LEASE_ALLOW_ZTS").is_none() {
        bail!(
            "redis_lease: {} is a ZTS (thread-safe) build of PHP {}; redis_lease supports NTS PHP \
             only, until a ZTS build has passed its test suite (set REDIS_LEASE_ALLOW_ZTS=1 to build \
             one anyway, for testing)",
            php.display(),
            info.version().unwrap_or("?")
        );
    }

    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo::rustc-cdylib-link-arg=-undefined");
        println!("cargo::rustc-cdylib-link-arg=dynamic_lookup");
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
