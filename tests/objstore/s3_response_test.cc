// S3 answers without a server: the bounded XML reader, ListObjectsV2 and Error
// documents, and the classification of every outcome (s3_response.h).
#include "objstore/s3_response.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dex::s3 {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::string_view kStore = "s3://bucket/prefix at http://127.0.0.1:9000";

std::string error_body(std::string_view code, std::string_view message = "the message") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + std::string(code) +
         "</Code><Message>" + std::string(message) +
         "</Message><Key>k</Key><RequestId>4442587FB7D0A2F9</RequestId></Error>";
}

Call get_call() { return Call{Operation::kGet, PutMode::kOverwrite, "a/b", kStore}; }
Call put_call(PutMode mode) { return Call{Operation::kPut, mode, "a/b", kStore}; }
Call delete_call() { return Call{Operation::kDelete, PutMode::kOverwrite, "a/b", kStore}; }
Call list_call() { return Call{Operation::kList, PutMode::kOverwrite, "a/", kStore}; }

// ---- XML ----

TEST(S3Xml, ParsesAListBucketResult) {
  const std::string body = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>p/a&amp;b</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>
    <Owner><ID>x</ID><DisplayName></DisplayName></Owner><StorageClass>STANDARD</StorageClass>
  </Contents>
  <!-- a comment -->
  <Contents><Key>p/&lt;c&gt;&#x41;&#66;</Key><Size>1</Size></Contents>
  <NextContinuationToken>abc</NextContinuationToken>
</ListBucketResult>)";
  auto page = parse_list_result(body);
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  EXPECT_THAT(page->keys, ElementsAre("p/a&b", "p/<c>AB"));
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].modified_unix_ms, 1'767'225'600'000);  // 2026-01-01T00:00:00Z
  EXPECT_EQ(page->objects[0].size_bytes, 0u);
  EXPECT_EQ(page->objects[1].modified_unix_ms, -1);  // no LastModified: not known
  EXPECT_EQ(page->objects[1].size_bytes, 1u);
  EXPECT_TRUE(page->truncated);
}

TEST(S3Xml, ReadsLastModifiedAsUnixMilliseconds) {
  EXPECT_EQ(parse_iso8601_utc_ms("1970-01-01T00:00:00.000Z"), 0);
  EXPECT_EQ(parse_iso8601_utc_ms("1970-01-01T00:00:01Z"), 1000);
  EXPECT_EQ(parse_iso8601_utc_ms("2009-10-12T17:50:30.5Z"), 1'255'369'830'500);
  EXPECT_EQ(parse_iso8601_utc_ms("2024-02-29T23:59:59.123456Z"), 1'709'251'199'123);
  EXPECT_EQ(parse_iso8601_utc_ms("2026-01-01T00:00:00.000+01:00"), std::nullopt);
  EXPECT_EQ(parse_iso8601_utc_ms("2026-13-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_iso8601_utc_ms("2026-01-01 00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_iso8601_utc_ms("2026-01-01T00:00:00.Z"), std::nullopt);
  EXPECT_EQ(parse_iso8601_utc_ms(""), std::nullopt);
}

TEST(S3Xml, ParsesAnEmptyListAndSelfClosingElements) {
  auto page = parse_list_result(
      "<ListBucketResult><Name>b</Name><Prefix/><KeyCount>0</KeyCount>"
      "<IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(page.is_ok()) << page.status().to_string();
  EXPECT_TRUE(page->keys.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(S3Xml, KeepsCdataAndDropsNamespacePrefixes) {
  auto root = parse_xml("<s3:Error xmlns:s3='x'><s3:Code><![CDATA[A<B]]></s3:Code></s3:Error>");
  ASSERT_TRUE(root.is_ok()) << root.status().to_string();
  EXPECT_EQ(root->name, "Error");
  EXPECT_EQ(root->child_text("Code"), "A<B");
}

TEST(S3Xml, RefusesMalformedDocumentsWithAReason) {
  for (std::string_view bad :
       {"", "no xml", "<a>", "<a></b>", "<a><b></a>", "<a>&bogus;</a>", "<a>&#xZZ;</a>",
        "<a x='1>t</a>", "<a></a><b></b>", "<!DOCTYPE a><a/>", "<a><!-- open</a>",
        "<a><![CDATA[x</a>", "<a>&#x110000;</a>"}) {
    auto root = parse_xml(bad);
    EXPECT_TRUE(root.status().is_corruption()) << "accepted: " << bad;
    EXPECT_THAT(root.status().message(), HasSubstr("malformed XML")) << bad;
  }
}

TEST(S3Xml, EnforcesDepthElementAndSizeLimits) {
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  for (int i = 0; i < 40; ++i) deep += "</a>";
  EXPECT_THAT(parse_xml(deep).status().message(), HasSubstr("nested deeper than 32"));
  std::string wide = "<r>";
  for (int i = 0; i < 20; ++i) wide += "<k/>";
  wide += "</r>";
  XmlLimits few;
  few.elements_max = 10;
  EXPECT_THAT(parse_xml(wide, few).status().message(), HasSubstr("more than 10 elements"));
  XmlLimits small;
  small.bytes_max = 8;
  EXPECT_THAT(parse_xml("<r>0123456789</r>", small).status().message(), HasSubstr("bytes"));
  EXPECT_TRUE(parse_xml(wide).is_ok());
}

TEST(S3Xml, ListResultMustBeAListResult) {
  EXPECT_TRUE(parse_list_result("<Other/>").status().is_corruption());
  EXPECT_TRUE(parse_list_result("<ListBucketResult><Contents/><IsTruncated>false</IsTruncated>"
                                "</ListBucketResult>")
                  .status()
                  .is_corruption());
  EXPECT_TRUE(parse_list_result("<ListBucketResult></ListBucketResult>").status().is_corruption());
}

TEST(S3Xml, ParsesErrorDocumentsOnly) {
  const S3Error e = parse_error(error_body("SlowDown", "Please reduce your request rate."));
  EXPECT_EQ(e.code, "SlowDown");
  EXPECT_EQ(e.message, "Please reduce your request rate.");
  EXPECT_TRUE(parse_error("<ListBucketResult/>").code.empty());
  EXPECT_TRUE(parse_error("<Error><Code>x</Code>").code.empty());  // truncated
  EXPECT_TRUE(parse_error("").code.empty());
}

// ---- classification, rule by rule ----

TEST(S3Classify, SuccessIsOk) {
  EXPECT_TRUE(classify_response(get_call(), 200, "any body").is_ok());
  EXPECT_TRUE(classify_response(put_call(PutMode::kCreate), 200, "").is_ok());
  EXPECT_TRUE(classify_response(delete_call(), 204, "").is_ok());
  EXPECT_TRUE(classify_response(list_call(), 200, "<ListBucketResult/>").is_ok());
}

TEST(S3Classify, AGetBodyThatLooksLikeAnErrorIsStillTheObject) {
  EXPECT_TRUE(classify_response(get_call(), 200, error_body("InternalError")).is_ok());
}

TEST(S3Classify, Status412IsPreconditionFailed) {
  for (PutMode mode : {PutMode::kCreate, PutMode::kReplace}) {
    const Status s = classify_response(put_call(mode), 412, error_body("PreconditionFailed"));
    EXPECT_TRUE(s.is_precondition_failed()) << s.to_string();
  }
  EXPECT_TRUE(classify_response(put_call(PutMode::kCreate), 412, "").is_precondition_failed());
}

TEST(S3Classify, NoSuchKeyOnIfMatchIsPreconditionFailed) {
  const Status s = classify_response(put_call(PutMode::kReplace), 404, error_body("NoSuchKey"));
  EXPECT_TRUE(s.is_precondition_failed()) << s.to_string();
  EXPECT_TRUE(classify_response(put_call(PutMode::kReplace), 404, "").is_precondition_failed());
}

TEST(S3Classify, NotFoundOnGetIsNotFound) {
  EXPECT_TRUE(classify_response(get_call(), 404, error_body("NoSuchKey")).is_not_found());
  EXPECT_TRUE(classify_response(get_call(), 404, "").is_not_found());
}

TEST(S3Classify, NoSuchKeyOnDeleteIsOk) {
  EXPECT_TRUE(classify_response(delete_call(), 404, error_body("NoSuchKey")).is_ok());
}

TEST(S3Classify, NoSuchBucketIsPermanentEverywhere) {
  for (const Call& call : {get_call(), put_call(PutMode::kCreate), put_call(PutMode::kReplace),
                           delete_call(), list_call()}) {
    const Status s = classify_response(call, 404, error_body("NoSuchBucket"));
    EXPECT_TRUE(s.is_permanent()) << s.to_string();
  }
}

TEST(S3Classify, ForbiddenAndBadRequestsArePermanent) {
  for (std::string_view code : {"AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId"}) {
    EXPECT_TRUE(classify_response(get_call(), 403, error_body(code)).is_permanent()) << code;
  }
  EXPECT_TRUE(classify_response(get_call(), 403, "").is_permanent());
  EXPECT_TRUE(classify_response(put_call(PutMode::kCreate), 400, error_body("InvalidArgument"))
                  .is_permanent());
  EXPECT_TRUE(classify_response(put_call(PutMode::kCreate), 405, "").is_permanent());
}

TEST(S3Classify, ConflictsThrottlingAndServerErrorsAreTransient) {
  const Call put = put_call(PutMode::kCreate);
  EXPECT_TRUE(classify_response(put, 409, error_body("ConditionalRequestConflict")).is_transient());
  EXPECT_TRUE(classify_response(put, 409, "").is_transient());
  EXPECT_TRUE(classify_response(put, 503, error_body("SlowDown")).is_transient());
  EXPECT_TRUE(classify_response(put, 429, "").is_transient());
  EXPECT_TRUE(classify_response(put, 500, error_body("InternalError")).is_transient());
  EXPECT_TRUE(classify_response(put, 502, "<html>bad gateway</html>").is_transient());
  EXPECT_TRUE(classify_response(put, 504, "").is_transient());
  EXPECT_TRUE(classify_response(put, 400, error_body("RequestTimeout")).is_transient());
}

// AWS answers 409 ConditionalRequestConflict when a conditional write races another write of the
// same key that is still in progress (issue 30): a conflict in progress, retried, never a
// permanent failure nor a lost race (412), whatever the write's condition.
TEST(S3Classify, ConditionalRequestConflictIsAConflictInProgressAndRetried) {
  for (PutMode mode : {PutMode::kCreate, PutMode::kReplace, PutMode::kOverwrite}) {
    const Status s = classify_response(
        put_call(mode), 409,
        error_body("ConditionalRequestConflict",
                   "A conflicting conditional operation is currently in progress against this "
                   "resource. Please try again."));
    EXPECT_TRUE(s.is_transient()) << s.to_string();
    EXPECT_FALSE(s.is_precondition_failed());
    EXPECT_THAT(s.message(), HasSubstr("HTTP 409 ConditionalRequestConflict"));
    EXPECT_THAT(s.message(), HasSubstr("a conflicting write of the key is in progress"));
  }
  EXPECT_TRUE(classify_response(delete_call(), 409, error_body("ConditionalRequestConflict"))
                  .is_transient());
  // The code decides, whatever status carries it.
  EXPECT_TRUE(
      classify_response(put_call(PutMode::kCreate), 200, error_body("ConditionalRequestConflict"))
          .is_transient());
  EXPECT_TRUE(
      classify_response(put_call(PutMode::kCreate), 400, error_body("ConditionalRequestConflict"))
          .is_transient());
}

TEST(S3Classify, AnErrorInTheBodyOfA200IsClassifiedByItsCode) {
  const Status slow = classify_response(put_call(PutMode::kCreate), 200, error_body("SlowDown"));
  EXPECT_TRUE(slow.is_transient()) << slow.to_string();
  EXPECT_THAT(slow.message(), HasSubstr("error document in a success response"));
  EXPECT_TRUE(classify_response(list_call(), 200, error_body("InternalError")).is_transient());
  EXPECT_TRUE(classify_response(list_call(), 200, error_body("AccessDenied")).is_transient())
      << "an unknown code in a 200 is treated as transient";
  EXPECT_TRUE(classify_response(put_call(PutMode::kReplace), 200, error_body("PreconditionFailed"))
                  .is_precondition_failed());
  EXPECT_TRUE(classify_response(delete_call(), 200, error_body("NoSuchBucket")).is_permanent());
}

TEST(S3Classify, BucketCreationAcceptsAnOwnedBucketOnly) {
  const Call create{Operation::kCreateBucket, PutMode::kOverwrite, "bucket", kStore};
  EXPECT_TRUE(classify_response(create, 409, error_body("BucketAlreadyOwnedByYou")).is_ok());
  EXPECT_TRUE(classify_response(create, 409, error_body("BucketAlreadyExists")).is_permanent());
}

TEST(S3Classify, MessagesNameOperationKeyStatusCodeAndStore) {
  const Status s = classify_response(put_call(PutMode::kCreate), 412,
                                     error_body("PreconditionFailed", "At least one failed"));
  EXPECT_EQ(s.message(),
            "s3 put 'a/b' (s3://bucket/prefix at http://127.0.0.1:9000): HTTP 412 "
            "PreconditionFailed: At least one failed");
  const Status plain = classify_response(get_call(), 502, "Bad\ngateway");
  EXPECT_THAT(plain.message(), HasSubstr("s3 get 'a/b'"));
  EXPECT_THAT(plain.message(), HasSubstr("HTTP 502: Bad gateway"));
}

TEST(S3Classify, TransportFailures) {
  const Call put = put_call(PutMode::kCreate);
  const Status timeout = classify_transport(put, CURLE_OPERATION_TIMEDOUT, "after 200 ms", 200);
  EXPECT_TRUE(timeout.is_transient());
  EXPECT_THAT(timeout.message(), HasSubstr("timed out after 200 ms, a write may still land"));
  EXPECT_THAT(timeout.message(), HasSubstr("s3 put 'a/b'"));
  for (CURLcode code : {CURLE_COULDNT_CONNECT, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
                        CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_COULDNT_RESOLVE_HOST}) {
    EXPECT_TRUE(classify_transport(put, code, "", 1000).is_transient()) << code;
  }
  for (CURLcode code :
       {CURLE_URL_MALFORMAT, CURLE_PEER_FAILED_VERIFICATION, CURLE_UNSUPPORTED_PROTOCOL}) {
    EXPECT_TRUE(classify_transport(put, code, "", 1000).is_permanent()) << code;
  }
}

}  // namespace
}  // namespace dex::s3
