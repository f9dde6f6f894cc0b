// SPDX-License-Identifier: MIT
// xgr's own XRC-137 rule container: the interface and events of
// XRC-137_Smart_Contract_Standard.md §4.1; the owner and executor
// extension comes from OwnedExecutors.sol.
// getRule() returns the exact stored string; an XGR1 envelope requires
// encryption metadata (rid != 0), plain JSON clears it.
pragma solidity ^0.8.0;

import "OwnedExecutors.sol";

contract XRC137 is OwnedExecutors {
    function _tag() internal pure override returns (string memory) {
        return "XRC137";
    }

    struct EncInfo {
        bytes32 rid;
        string suite;
        bytes encDEK;
    }

    event RuleUpdated(string newRule);
    event EncryptedSet(bytes32 rid, string suite);
    event EncryptedCleared();

    string private ruleJson;
    string public constant nameXRC = "XGR_XRC137";
    EncInfo public encrypted;

    constructor(string memory jsonRule) {
        require(!_isEnvelope(jsonRule), "XRC137: envelope needs setRuleAndEncrypted");
        ruleJson = jsonRule;
        emit RuleUpdated(jsonRule);
    }

    function getRule() external view returns (string memory) {
        return ruleJson;
    }

    function getNameXRC() external pure returns (string memory) {
        return nameXRC;
    }

    function isEncrypted() public view returns (bool) {
        return encrypted.rid != bytes32(0);
    }

    function updateRule(string memory jsonOrBlob) external onlyOwner {
        if (_isEnvelope(jsonOrBlob)) {
            require(isEncrypted(), "XRC137: envelope without encryption metadata");
        } else if (isEncrypted()) {
            delete encrypted;
            emit EncryptedCleared();
        }
        ruleJson = jsonOrBlob;
        emit RuleUpdated(jsonOrBlob);
    }

    function setRuleAndEncrypted(
        string calldata jsonOrBlob,
        bytes32 rid,
        string calldata suite,
        bytes calldata encDEK
    ) external onlyOwner {
        if (rid == bytes32(0)) {
            require(!_isEnvelope(jsonOrBlob), "XRC137: envelope without rid");
            if (isEncrypted()) {
                delete encrypted;
                emit EncryptedCleared();
            }
        } else {
            encrypted = EncInfo(rid, suite, encDEK);
            emit EncryptedSet(rid, suite);
        }
        ruleJson = jsonOrBlob;
        emit RuleUpdated(jsonOrBlob);
    }


    function _isEnvelope(string memory s) private pure returns (bool) {
        bytes memory b = bytes(s);
        return b.length >= 4 && b[0] == "X" && b[1] == "G" && b[2] == "R" && b[3] == "1";
    }
}
