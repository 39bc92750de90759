use pmi::wire::{self, Message};

#[test]
fn parses_by_key() {
    let m = wire::parse("cmd=put kvsname=x key=k value=v\n").unwrap();
    assert_eq!(m.cmd(), Some("put"));
    assert_eq!(m.get("kvsname"), Some("x"));
    assert_eq!(m.get("key"), Some("k"));
    assert_eq!(m.get("value"), Some("v"));
    assert_eq!(m.get("absent"), None);
    assert_eq!(m.rc(), 0, "a reply without rc counts as success");
}

#[test]
fn reordered_and_extra_fields() {
    // Hydra style: msg=success added, rc elsewhere, cmd not first.
    let m = wire::parse("value=abc msg=success rc=0 cmd=get_result\r\n").unwrap();
    assert_eq!(m.cmd(), Some("get_result"));
    assert_eq!(m.get("value"), Some("abc"));
    assert_eq!(m.get("msg"), Some("success"));
    assert_eq!(m.rc(), 0);
    let m = wire::parse("cmd=get_result   rc=-1  msg=key_x_not_found").unwrap();
    assert_eq!(m.rc(), -1);
    let m = wire::parse("cmd=maxes kvsname_max=256 vallen_max=1024 keylen_max=64 rc=0").unwrap();
    assert_eq!(m.get_int("keylen_max"), Some(64));
    assert_eq!(m.get_int("vallen_max"), Some(1024));
}

#[test]
fn lenient_tokens() {
    // '=' inside a value, a bare token, an empty value.
    let m = wire::parse("cmd=get_result value=a=b endcmd empty=").unwrap();
    assert_eq!(m.get("value"), Some("a=b"));
    assert_eq!(m.get("endcmd"), Some(""));
    assert_eq!(m.get("empty"), Some(""));
    assert!(wire::parse("").is_err());
    assert!(wire::parse("   \n").is_err());
    assert!(wire::parse("=x cmd=put").is_err());
    assert_eq!(wire::parse("mcmd=spawn").unwrap().cmd(), Some("spawn"));
    assert_eq!(wire::parse("rc=notanumber").unwrap().rc(), -1);
}

#[test]
fn formats_lines() {
    assert_eq!(
        wire::format("put", &[("kvsname", "x"), ("key", "k"), ("value", "v")]),
        "cmd=put kvsname=x key=k value=v\n"
    );
    let m = Message::new("abort").with("exitcode", 3);
    assert_eq!(m.to_line(), "cmd=abort exitcode=3\n");
    assert_eq!(wire::parse(&m.to_line()).unwrap(), m);
    assert!(wire::is_valid_key("k_1"));
    assert!(!wire::is_valid_key("a b"));
    assert!(!wire::is_valid_key("a=b"));
    assert!(!wire::is_valid_key(""));
    assert!(wire::is_valid_value(""));
    assert!(!wire::is_valid_value("x\ny"));
}
