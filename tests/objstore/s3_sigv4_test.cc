// The hand-written SigV4 signer against AWS's published vectors: the generic
// SigV4 test suite (aws-sig-v4-test-suite: example credentials AKIDEXAMPLE,
// us-east-1, service "service", 20150830T123600Z), the signing-key example of
// the SigV4 documentation, and the four worked examples of the S3 page
// "Signature Calculations for the Authorization Header: Transferring Payload
// in a Single Chunk" (examplebucket, 20130524T000000Z). Every expected value
// below is AWS's published one.
#include "objstore/sigv4.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dex::sigv4 {
namespace {

// ---- aws-sig-v4-test-suite ----

const Credentials kSuiteCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
const Scope kSuiteScope{"us-east-1", "service"};
constexpr std::string_view kSuiteDate = "20150830T123600Z";

Request suite_request(std::string method, std::string raw_path, Pairs query = {}) {
  return Request{std::move(method),
                 std::move(raw_path),
                 std::move(query),
                 {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", std::string(kSuiteDate)}},
                 std::string(kEmptyPayloadSha256)};
}

std::string suite_signature(const Request& request) {
  return sign(request, kSuiteCredentials, kSuiteScope, kSuiteDate).signature;
}

TEST(SigV4Suite, GetVanillaMatchesCanonicalRequestStringToSignAndAuthorization) {
  const Signed s = sign(suite_request("GET", "/"), kSuiteCredentials, kSuiteScope, kSuiteDate);
  EXPECT_EQ(s.canonical_request,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4Suite, GetVanillaEmptyQueryKey) {
  EXPECT_EQ(suite_signature(suite_request("GET", "/", {{"Param1", "value1"}})),
            "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb");
}

TEST(SigV4Suite, GetVanillaQueryOrderKeyCaseSortsTheQuery) {
  EXPECT_EQ(
      suite_signature(suite_request("GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}})),
      "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

TEST(SigV4Suite, GetVanillaQueryUnreservedKeepsUnreservedCharacters) {
  const std::string unreserved =
      "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  EXPECT_EQ(suite_signature(suite_request("GET", "/", {{unreserved, unreserved}})),
            "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
}

TEST(SigV4Suite, GetUtf8EncodesThePathOnce) {
  const Signed s =
      sign(suite_request("GET", "/\xE1\x88\xB4"), kSuiteCredentials, kSuiteScope, kSuiteDate);
  EXPECT_EQ(s.canonical_request.substr(0, 15), "GET\n/%E1%88%B4\n");
  EXPECT_EQ(s.signature, "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
}

TEST(SigV4Suite, GetSpaceUnnormalizedEncodesTheSpaceOnce) {
  const Signed s =
      sign(suite_request("GET", "/example space/"), kSuiteCredentials, kSuiteScope, kSuiteDate);
  EXPECT_EQ(s.canonical_request.substr(0, 23), "GET\n/example%20space/\n\n");
  EXPECT_EQ(s.signature, "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
}

TEST(SigV4Suite, PostVanilla) {
  EXPECT_EQ(suite_signature(suite_request("POST", "/")),
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
}

TEST(SigV4Suite, SigningKeyMatchesTheDocumentedDerivation) {
  // "Examples of how to derive a signing key": the iam example.
  EXPECT_EQ(
      hex(signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam")),
      "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

// ---- the S3 signing examples ----

const Credentials kS3Credentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 ""};
const Scope kS3Scope{"us-east-1", "s3"};
constexpr std::string_view kS3Date = "20130524T000000Z";
constexpr std::string_view kS3Host = "examplebucket.s3.amazonaws.com";

Request s3_request(std::string method, std::string raw_path, Pairs query, Pairs extra_headers,
                   std::string payload_sha256 = std::string(kEmptyPayloadSha256)) {
  Pairs headers = {{"Host", std::string(kS3Host)},
                   {"x-amz-content-sha256", payload_sha256},
                   {"x-amz-date", std::string(kS3Date)}};
  headers.insert(headers.end(), extra_headers.begin(), extra_headers.end());
  return Request{std::move(method), std::move(raw_path), std::move(query), std::move(headers),
                 std::move(payload_sha256)};
}

TEST(SigV4S3Examples, GetObjectWithRange) {
  const Signed s = sign(s3_request("GET", "/test.txt", {}, {{"Range", "bytes=0-9"}}),
                        kS3Credentials, kS3Scope, kS3Date);
  EXPECT_EQ(s.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4S3Examples, PutObjectEncodesTheDollarInThePathOnce) {
  const std::string body = "Welcome to Amazon S3.";
  const std::string payload = sha256_hex(body);
  ASSERT_EQ(payload, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const Signed s = sign(s3_request("PUT", "/test$file.text", {},
                                   {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                                   payload),
                        kS3Credentials, kS3Scope, kS3Date);
  EXPECT_EQ(s.canonical_request.substr(0, 23), "PUT\n/test%24file.text\n\n");
  EXPECT_EQ(s.signed_headers, "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(s.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4S3Examples, GetBucketLifecycleSignsAValuelessQueryParameterAsNameEquals) {
  const Signed s =
      sign(s3_request("GET", "/", {{"lifecycle", ""}}, {}), kS3Credentials, kS3Scope, kS3Date);
  EXPECT_EQ(s.canonical_request.substr(0, 17), "GET\n/\nlifecycle=\n");
  EXPECT_EQ(s.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4S3Examples, ListObjectsSortsTheQuery) {
  const Signed s = sign(s3_request("GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}, {}),
                        kS3Credentials, kS3Scope, kS3Date);
  EXPECT_EQ(s.canonical_request.substr(0, 26), "GET\n/\nmax-keys=2&prefix=J\n");
  EXPECT_EQ(s.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

// ---- the S3 canonicalisation rules the vectors rely on ----

TEST(SigV4S3Rules, PathIsEncodedOnceAndNeverNormalised) {
  EXPECT_EQ(encode_path("/bucket/a b/c%d"), "/bucket/a%20b/c%25d");  // '%' itself encoded once
  EXPECT_EQ(encode_path("/bucket/./x/../y//z"), "/bucket/./x/../y//z");
  EXPECT_EQ(encode_path("/b/k=v&w:x+y"), "/b/k%3Dv%26w%3Ax%2By");
  EXPECT_EQ(encode_path(""), "/");
}

TEST(SigV4S3Rules, QueryEncodesSlashesAndSortsByEncodedName) {
  EXPECT_EQ(canonical_query({{"prefix", "a/b c"}, {"list-type", "2"}, {"start-after", "a/b"}}),
            "list-type=2&prefix=a%2Fb%20c&start-after=a%2Fb");
  EXPECT_EQ(canonical_query({}), "");
}

TEST(SigV4S3Rules, HeaderValuesAreTrimmedAndFoldedAndNamesLowerCased) {
  Request r = suite_request("GET", "/");
  r.headers.push_back({"My-Header1", "  value1  with   spaces "});
  r.headers.push_back({"my-header1", "second"});
  const Signed s = sign(r, kSuiteCredentials, kSuiteScope, kSuiteDate);
  EXPECT_NE(s.canonical_request.find("\nmy-header1:value1 with spaces,second\n"), std::string::npos)
      << s.canonical_request;
  EXPECT_EQ(s.signed_headers, "host;my-header1;x-amz-date");
}

TEST(SigV4S3Rules, AmzDateIsUtc) {
  using namespace std::chrono;
  const system_clock::time_point when = sys_days{year{2015} / 8 / 30} + hours(12) + minutes(36);
  EXPECT_EQ(amz_date(when), "20150830T123600Z");
}

TEST(SigV4S3Rules, EverySignedInputChangesTheSignature) {
  const Request base = s3_request("GET", "/test.txt", {}, {});
  const std::string sig = sign(base, kS3Credentials, kS3Scope, kS3Date).signature;
  Request other = base;
  other.raw_path = "/test.txu";
  EXPECT_NE(sign(other, kS3Credentials, kS3Scope, kS3Date).signature, sig);
  EXPECT_NE(sign(base, kS3Credentials, Scope{"eu-west-1", "s3"}, kS3Date).signature, sig);
  EXPECT_NE(sign(base, kS3Credentials, kS3Scope, "20130524T000001Z").signature, sig);
  Credentials wrong = kS3Credentials;
  wrong.secret_access_key += "x";
  EXPECT_NE(sign(base, wrong, kS3Scope, kS3Date).signature, sig);
}

}  // namespace
}  // namespace dex::sigv4
