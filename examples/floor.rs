//! `make bench`'s floor row: redis-rs alone, the same two commands a lock pair
//! costs (SET NX PX of a fresh random token, then a compare-and-delete script by
//! EVALSHA), one connection, one at a time. What is left between this and
//! redis_lease's loop is ours; what is left between this and redis-benchmark is
//! redis-rs's.
//!
//! `cargo run --release --example floor -- <host:port> <pairs>`; prints
//! `{"ops_per_s": ...}`.

use std::time::Instant;

fn main() -> redis::RedisResult<()> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map_or("127.0.0.1:6379", String::as_str);
    let n: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let mut c = client.get_connection()?;
    let unlock = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let pair = |c: &mut redis::Connection| -> redis::RedisResult<()> {
        let token = format!("{:032x}", rand::random::<u128>());
        let took: Option<String> = redis::cmd("SET")
            .arg("bench:floor")
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query(c)?;
        assert!(took.is_some(), "the floor's key was taken by someone else");
        let released: i64 = unlock.key("bench:floor").arg(&token).invoke(c)?;
        assert_eq!(released, 1);
        Ok(())
    };
    for _ in 0..200 {
        pair(&mut c)?;
    }
    let start = Instant::now();
    for _ in 0..n {
        pair(&mut c)?;
    }
    println!(
        "{{\"ops_per_s\": {:.1}}}",
        f64::from(n) / start.elapsed().as_secs_f64()
    );
    Ok(())
}
