//! The little XML S3 answers with, read without a parser: the text of
//! named elements of a body that was read up to a bound. Hostile input
//! only ever yields `None` or fewer items.

/// Bodies of error and listing answers are read up to this many bytes.
pub const MAX_BODY: u64 = 1 << 20;

/// The text of every `<name>…</name>` in `xml`, unescaped, in order.
pub fn all<'a>(xml: &'a str, name: &'a str) -> impl Iterator<Item = String> + 'a {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let mut rest = xml;
    std::iter::from_fn(move || {
        let at = rest.find(&open)?;
        let after = &rest[at + open.len()..];
        let end = after.find(&close)?;
        let text = &after[..end];
        rest = &after[end + close.len()..];
        Some(unescape(text))
    })
}

/// The text of the first `<name>…</name>` in `xml`.
pub fn first(xml: &str, name: &str) -> Option<String> {
    all(xml, name).next()
}

/// `s` with the five predefined entities replaced (others left as they are).
pub fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// `s` escaped for element text.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements() {
        let x = "<?xml?><Error><Code>NoSuchKey</Code><Message>a &amp; b</Message></Error>";
        assert_eq!(first(x, "Code").as_deref(), Some("NoSuchKey"));
        assert_eq!(first(x, "Message").as_deref(), Some("a & b"));
        assert_eq!(first(x, "Key"), None);
        let l = "<Upload><Key>k1</Key><UploadId>1</UploadId></Upload><Upload><Key>k2</Key>";
        assert_eq!(all(l, "Key").collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(first("<Code>unterminated", "Code"), None);
        assert_eq!(first("</Code><Code>", "Code"), None);
        assert_eq!(escape("\"a\"&<b>"), "\"a\"&amp;&lt;b&gt;");
    }
}
